"""Hindsight skills: the analysis prompt, robust parsing, teachers."""

from seed.skills.analyzer import MIN_SKILL_WORDS, Analysis, analysis_prompt, parse_analysis

# `distill.skill_source`: where a skill comes from (the analyzers in seed.skills.sources)
SKILL_SOURCES = ("policy", "teacher", "library", "privileged", "sibling")

__all__ = ["MIN_SKILL_WORDS", "SKILL_SOURCES", "Analysis", "analysis_prompt", "parse_analysis"]
