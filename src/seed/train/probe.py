"""`seed probe`: does a teacher context move the policy toward the expert's action, before any GPU time is spent?

A fixed panel of states of one split, half from expert play and half from the policy's own rollouts. In each
state the policy's response is cut after `<action>`, and two continuations are scored: the expert's next move
and the action the policy sampled there. Each is scored under the plain prompt and under every teacher context
(the one renderer, `seed.agent.render`, with the context as the skill block); the shift of a context is its
log-prob minus the plain one, summed over the action's tokens (nats).

Contexts: policy (the analyzer's skill for the state's episode), oracle (the oracle teacher's skill), sibling
(another successful episode of the same task, as `distill.skill_source: sibling` renders it), privileged (the
expert's solution from the start), and two controls that carry no information about the state: shuffled (the
oracle's skill of an episode of another task) and empty (the skill block with nothing in it). An informative
context raises the expert action (expert_delta_mean > 0, the *skill lift*) and raises it more than the sampled
action where the two differ (prefers_expert_share > 0.5); the controls should do neither.
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from seed.agent import left_truncate, parse_action, render, situation
from seed.envs.base import checked_result
from seed.skills.sources import PrivilegedAnalyzer, TeacherAnalyzer, sibling_contexts
from seed.skills.teachers import OracleTeacher, expert_moves
from seed.train.distill import policy_analyzer
from seed.types import Episode, StepSample, StepState

if TYPE_CHECKING:  # annotations only
    from seed.train.components import Components

SCORING_BUDGET = 8192  # padded tokens per no-grad scoring micro-batch
CONTEXTS = ("policy", "oracle", "sibling", "privileged", "shuffled", "empty")
EXAMPLES = 4  # context texts per context kept in the result


@dataclass
class ProbeState:
    sample: StepSample  # the state, and the policy's response in it
    episode: Episode  # the episode the state belongs to: its contexts are written for it
    source: str  # "expert" (expert play) or "policy" (the policy's rollout)
    expert_action: str


def expert_episode(env, env_name: str, task_seed: int, group: int, history_length: int, max_steps: int) -> Episode:
    """The expert's play of one task from its start, in the collector's shape (responses in the answer format)."""
    obs = checked_result("reset", env.reset(task_seed))
    ep = Episode(
        episode_id=f"probe-expert-t{task_seed}",
        group_id=group,
        task_seed=task_seed,
        task=obs.task,
        task_type=obs.task_type,
    )
    history: list[tuple[str, str]] = []
    for step in range(max_steps):
        plan = env.expert_plan()
        if not plan:
            break
        state = StepState.after(env_name, obs, history, history_length, step)
        text = f"<think>{situation(obs.text)}</think><action>{plan[0]}</action>"
        ep.steps.append(StepSample(state, [], [], [], text, plan[0], True, 0.0, ep.episode_id, group, step))
        history.append((obs.text, plan[0]))
        obs, _, done, _ = checked_result("step", env.step(plan[0]))
        if done or obs.won:
            break
    ep.won = bool(obs.won)
    return ep


def build_panel(
    components, split: str, n_states: int, group_size: int = 4, seed: int = 0
) -> tuple[list[ProbeState], list[Episode], list[Episode]]:
    """The panel (half expert-play states, half policy states, drawn with `seed`), and the episodes behind it."""
    cfg = components.cfg
    n_tasks = max(2, math.ceil(n_states / 4))
    seeds = list(range(n_tasks))
    env = components.env_factory(split)()
    experts = [
        expert_episode(env, cfg.env.name, s, t, cfg.env.history_length, cfg.env.max_steps) for t, s in enumerate(seeds)
    ]
    collector = components.collector(split)
    rollouts = collector.collect(
        components.rollout_backend(), seeds, group_size, components.rollout_sampling(), id_prefix=f"probe-{split}-"
    )
    collector.close()
    policy_states = []
    for e in rollouts:
        if e.error is None:
            for step, move in zip(e.steps, expert_moves(env, e, cfg.rollout.validity)):
                if move is not None:
                    policy_states.append(ProbeState(step, e, "policy", move))
    expert_states = [ProbeState(s, e, "expert", s.action) for e in experts for s in e.steps]
    rng = random.Random(seed)
    half = n_states // 2
    picked = rng.sample(expert_states, min(half, len(expert_states)))
    picked += rng.sample(policy_states, min(n_states - len(picked), len(policy_states)))
    _sample_responses(components, [p for p in picked if p.source == "expert"])
    env.close()
    return picked, experts, rollouts


def _sample_responses(components: Components, states: list[ProbeState]) -> None:
    """The policy's own response in each expert-play state (the expert's text stays on the episode)."""
    cfg, tok = components.cfg, components.tokenizer
    prompts = [left_truncate(render(p.sample.state, tok), cfg.rollout.max_prompt_tokens) for p in states]
    gens = components.rollout_backend().generate(
        prompts, components.rollout_sampling(), batch_size=cfg.rollout.generation_batch_size
    )
    for p, prompt, gen in zip(states, prompts, gens):
        parsed = parse_action(gen.text, p.sample.state.admissible, cfg.rollout.validity)
        p.sample = StepSample(
            p.sample.state,
            prompt,
            gen.ids,
            gen.logps,
            gen.text,
            parsed.action,
            parsed.valid,
            0.0,
            p.episode.episode_id,
            p.episode.group_id,
            p.sample.step_index,
        )


def panel_contexts(
    components, split: str, panel: list[ProbeState], rollouts: list[Episode], names: tuple[str, ...] = CONTEXTS
) -> dict[str, list[str | None]]:
    """Per context, per state: the teacher context (None where the context has nothing for that state)."""
    episodes = list({id(p.episode): p.episode for p in panel}.values())
    index = {id(e): i for i, e in enumerate(episodes)}

    def skills(analyzer) -> list[str | None]:
        return [a.skill for _, a in analyzer.analyse(episodes)]

    per_episode: dict[str, list[str | None]] = {}
    if "oracle" in names or "shuffled" in names:
        per_episode["oracle"] = skills(TeacherAnalyzer(OracleTeacher(components.oracle_env_factory(split))))
    if "policy" in names:
        per_episode["policy"] = skills(policy_analyzer(components))
    if "privileged" in names:
        per_episode["privileged"] = skills(PrivilegedAnalyzer(components.env_factory(split)))
    if "sibling" in names:
        per_episode["sibling"] = sibling_contexts(episodes, donors=rollouts)
    if "shuffled" in names:  # the oracle's skill of the same-source episode of the next task
        by_task = {(e.group_id, e.episode_id.startswith("probe-expert")): e for e in episodes}
        groups = sorted({e.group_id for e in episodes})
        per_episode["shuffled"] = []
        for e in episodes:
            nxt = groups[(groups.index(e.group_id) + 1) % len(groups)]
            partner = by_task.get((nxt, e.episode_id.startswith("probe-expert")))
            per_episode["shuffled"].append(per_episode["oracle"][index[id(partner)]] if partner else None)
    out = {name: [per_episode[name][index[id(p.episode)]] for p in panel] for name in names if name != "empty"}
    if "empty" in names:
        out["empty"] = ["" for _ in panel]
    return {name: out[name] for name in names}


def continuation(tokenizer, p: ProbeState, action: str) -> tuple[list[int], int, int]:
    """Response ids: the policy's response up to `<action>` (or a restated situation when it has none), the
    action, `</action>`; and the action's token span [start, end)."""
    text = p.sample.response_text
    cut = text.lower().find("<action>")
    prefix = (
        text[: cut + len("<action>")] if cut >= 0 else f"<think>{situation(p.sample.state.observation)}</think><action>"
    )
    head = tokenizer.encode(prefix, add_special_tokens=False)
    body = tokenizer.encode(action, add_special_tokens=False)
    return head + body + tokenizer.encode("</action>", add_special_tokens=False), len(head), len(head) + len(body)


def score_panel(
    components, panel: list[ProbeState], contexts: dict[str, list[str | None]]
) -> tuple[dict[str, list[tuple[float, float] | None]], int]:
    """Per context (and `plain`), per state: log-probs of (expert action, sampled action), summed over its tokens;
    and the number of tokens the scoring forwards ran (each distinct prompt once, plus every continuation)."""
    cfg, tok = components.cfg, components.tokenizer
    conts = [(continuation(tok, p, p.expert_action), continuation(tok, p, p.sample.action or "")) for p in panel]
    prompts, responses, keys = [], [], []
    for name, per_state in {"plain": [None] * len(panel), **contexts}.items():
        for i, (p, ctx) in enumerate(zip(panel, per_state)):
            if name != "plain" and ctx is None:
                continue
            prompt = left_truncate(render(p.sample.state, tok, skill=ctx), cfg.rollout.max_prompt_tokens)
            for which in (0, 1):
                prompts.append(prompt)
                responses.append(conts[i][which][0])
                keys.append((name, i, which))
    budget = max(cfg.algo.token_budget, SCORING_BUDGET)  # no gradients: wider micro-batches fit
    logps = components.scoring_backend().logprobs(prompts, responses, budget)
    distinct = {tuple(p) for p in prompts}
    scored_tokens = sum(map(len, distinct)) + sum(map(len, responses))  # what the forwards ran (prompts once)
    out: dict[str, list] = {name: [None] * len(panel) for name in ["plain", *contexts]}
    for (name, i, which), lp in zip(keys, logps):
        _, start, end = conts[i][which]
        pair = list(out[name][i] or (0.0, 0.0))
        pair[which] = sum(lp[start:end])
        out[name][i] = tuple(pair)
    return out, scored_tokens


def mean_se(values: list[float]) -> tuple[float, float]:
    n = len(values)
    if n == 0:
        return math.nan, math.nan
    m = sum(values) / n
    var = sum((v - m) ** 2 for v in values) / (n - 1) if n > 1 else 0.0
    return m, math.sqrt(var / n)


def names_situation(context: str | None, state: StepState) -> bool:
    """Whether a context has a decision rule keyed by this state's situation (the oracle's wording)."""
    return bool(context) and f"when '{situation(state.observation).rstrip('.')}'" in context


def summarise(
    panel: list[ProbeState],
    scores: dict[str, list[tuple[float, float] | None]],
    contexts: dict[str, list[str | None]] | None = None,
) -> dict:
    """Per context: mean shift of the expert and of the sampled action (with SE), and over the states where the two
    differ, the share where the context raises the expert action more; `by_source` repeats the expert action's
    shift for the expert-play and the policy states alone (a context may inform one kind and not the other), and
    `by_rule` for the states whose situation the context names in a rule and the rest (given `contexts`): how
    strongly a rule is followed, apart from how many states a context covers."""
    plain = scores["plain"]
    out = {}
    for name, per_state in scores.items():
        if name == "plain":
            continue
        texts = (contexts or {}).get(name, [None] * len(panel))
        expert, sampled, prefers, sources, named = [], [], [], [], []
        for p, base, ctx, text in zip(panel, plain, per_state, texts):
            if ctx is None:
                continue
            e, s = ctx[0] - base[0], ctx[1] - base[1]
            expert.append(e)
            sampled.append(s)
            sources.append(p.source)
            named.append(names_situation(text, p.sample.state))
            if p.expert_action.lower() != (p.sample.action or "").lower():
                prefers.append(float(e > s))
        em, ese = mean_se(expert)
        sm, sse = mean_se(sampled)
        share = sum(prefers) / len(prefers) if prefers else math.nan
        by_source = {}
        for source in ("expert", "policy"):
            m, se = mean_se([e for e, src in zip(expert, sources) if src == source])
            by_source[source] = {"expert_delta_mean": m, "expert_delta_se": se, "n": sources.count(source)}
        by_rule = {}
        for key, want in (("named", True), ("not_named", False)):
            m, se = mean_se([e for e, hit in zip(expert, named) if hit == want])
            by_rule[key] = {"expert_delta_mean": m, "expert_delta_se": se, "n": named.count(want)}
        out[name] = {
            "expert_delta_mean": em,
            "expert_delta_se": ese,
            "sampled_delta_mean": sm,
            "sampled_delta_se": sse,
            "prefers_expert_share": share,
            "prefers_expert_se": math.sqrt(share * (1 - share) / len(prefers)) if prefers else math.nan,
            "n": len(expert),
            "n_differ": len(prefers),
            "by_source": by_source,
            "by_rule": by_rule,
        }
    return out


def run_probe(
    components,
    split: str = "valid_seen",
    n_states: int = 64,
    names: tuple[str, ...] = CONTEXTS,
    group_size: int = 4,
    seed: int = 0,
) -> dict:
    t0 = time.perf_counter()
    panel, _, rollouts = build_panel(components, split, n_states, group_size, seed)
    t1 = time.perf_counter()
    contexts = panel_contexts(components, split, panel, rollouts, names)
    t2 = time.perf_counter()
    scores, scored_tokens = score_panel(components, panel, contexts)
    t3 = time.perf_counter()
    plain_expert = [s[0] for s in scores["plain"] if s]
    return {
        "contexts": summarise(panel, scores, contexts),
        # what each context says: its first few distinct texts, in panel order (e.g. what the analyzer writes)
        "examples": {
            name: list(dict.fromkeys(c for c in per_state if c))[:EXAMPLES] for name, per_state in contexts.items()
        },
        "panel": {
            "split": split,
            "states": len(panel),
            "from_expert": sum(p.source == "expert" for p in panel),
            "from_policy": sum(p.source == "policy" for p in panel),
            "sampled_is_expert": sum(p.expert_action.lower() == (p.sample.action or "").lower() for p in panel),
            "plain_expert_logp_mean": mean_se(plain_expert)[0],
        },
        "time_s": {"panel": t1 - t0, "contexts": t2 - t1, "scoring": t3 - t2, "total": t3 - t0},
        # the scoring stage is forwards over these tokens: its time is this count over the CPU's throughput
        "scoring": {"tokens": scored_tokens, "tokens_per_s": scored_tokens / max(t3 - t2, 1e-9)},
    }


def format_probe(result: dict) -> str:
    lines = [
        f"{'context':<12}{'expert Δ':>10}{'± se':>8}{'sampled Δ':>11}{'± se':>8}{'prefers':>9}{'± se':>7}"
        f"{'n':>5}{'differ':>8}{'expert Δ: expert play':>24}{'policy states':>16}"
        f"{'rule named (n)':>22}{'not named (n)':>22}"
    ]
    for name, r in result["contexts"].items():
        by, rule = r["by_source"], r["by_rule"]
        lines.append(
            f"{name:<12}{r['expert_delta_mean']:>+10.3f}{r['expert_delta_se']:>8.3f}"
            f"{r['sampled_delta_mean']:>+11.3f}{r['sampled_delta_se']:>8.3f}"
            f"{r['prefers_expert_share']:>9.3f}{r['prefers_expert_se']:>7.3f}{r['n']:>5}{r['n_differ']:>8}"
            f"{by['expert']['expert_delta_mean']:>+14.3f} ± {by['expert']['expert_delta_se']:.3f}"
            f"{by['policy']['expert_delta_mean']:>+9.3f} ± {by['policy']['expert_delta_se']:.3f}"
            + "".join(
                f"{rule[k]['expert_delta_mean']:>+10.3f} ± {rule[k]['expert_delta_se']:.3f} ({rule[k]['n']:>2})"
                for k in ("named", "not_named")
            )
        )
    p, t = result["panel"], result["time_s"]
    lines.append(
        f"panel: {p['states']} states of {p['split']} ({p['from_expert']} from expert play, "
        f"{p['from_policy']} from the policy's rollouts; sampled = expert in {p['sampled_is_expert']}); "
        f"{t['total']:.1f} s (panel {t['panel']:.0f}, contexts {t['contexts']:.0f}, "
        f"scoring {t['scoring']:.0f}: {result['scoring']['tokens']} tokens at "
        f"{result['scoring']['tokens_per_s']:.0f}/s)"
    )
    return "\n".join(lines)
