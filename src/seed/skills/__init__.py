"""Hindsight skills: the analysis prompt, robust parsing, teachers."""

from seed.skills.analyzer import MIN_SKILL_WORDS, Analysis, analysis_prompt, parse_analysis

__all__ = ["MIN_SKILL_WORDS", "Analysis", "analysis_prompt", "parse_analysis"]
