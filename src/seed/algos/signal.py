"""Is the skill informative? The teacher signal of one update, read off the shifts the update already computed.

For every skilled step sample the update holds delta = l_skill - l_theta on each sampled token. These statistics
split it: action tokens (inside <action>...</action>) against the rest (thought, tags, end of turn), successes
against failures, positive against negative advantages and, where the env has an expert, sampled actions that are
the expert's next move against those that are not. A skill that carries information raises the agreeing actions
more than the others (skill lift > 0, AUC > 0.5); a skill the policy ignores leaves delta ~ 0 and the gate ~ 0.5
everywhere, and L_OPD is then self-imitation at half weight.

The gate sigmoid(beta * delta) is above 0.5 exactly where delta > 0 (beta > 0), so "gate open" is that share.
Every sum is additive over micro-batches and ranks; the AUC is computed from per-sample scores.
"""

from __future__ import annotations

from dataclasses import dataclass

PARTS = ("action", "rest")
SUBSETS = ("all", "success", "failure", "adv_pos", "adv_neg", "agree", "disagree")


@dataclass(frozen=True)
class SampleShift:
    """One skilled step sample as the update saw it."""

    delta: list[float]  # per response token: l_skill - l_theta
    action: list[bool]  # per response token: inside the action block
    won: bool  # its episode's outcome
    advantage: float
    agrees: bool | None = None  # the sampled action is the expert's next move (None: no expert move known)


def _subsets(s: SampleShift) -> list[str]:
    out = ["all", "success" if s.won else "failure"]
    if s.advantage != 0:
        out.append("adv_pos" if s.advantage > 0 else "adv_neg")
    if s.agrees is not None:
        out.append("agree" if s.agrees else "disagree")
    return out


def signal_sums(shifts: list[SampleShift]) -> dict[str, float]:
    """Per (part, subset): the sum of delta, the token count and the count of tokens with delta > 0."""
    sums = {f"{p}/{k}/{q}": 0.0 for p in PARTS for k in SUBSETS for q in ("delta_sum", "tokens", "raised")}
    for s in shifts:
        for subset in _subsets(s):
            for d, is_action in zip(s.delta, s.action):
                key = f"{'action' if is_action else 'rest'}/{subset}"
                sums[f"{key}/delta_sum"] += d
                sums[f"{key}/tokens"] += 1
                sums[f"{key}/raised"] += d > 0
    return sums


def auc(scores: list[float], labels: list[bool]) -> float | None:
    """Area under the ROC curve of `scores` as a classifier of `labels` (ties count half); None without both
    classes. The Mann-Whitney form: the share of (positive, negative) pairs the scores order correctly."""
    pos = [s for s, y in zip(scores, labels) if y]
    neg = [s for s, y in zip(scores, labels) if not y]
    if not pos or not neg:
        return None
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


def action_delta(s: SampleShift) -> float | None:
    """The sample's mean delta over its action tokens (None when it has none)."""
    values = [d for d, a in zip(s.delta, s.action) if a]
    return sum(values) / len(values) if values else None


def agreement_auc(shifts: list[SampleShift]) -> float | None:
    """AUC of the per-sample action delta as a classifier of "the sampled action is the expert's next move"."""
    scored = [(action_delta(s), s.agrees) for s in shifts if s.agrees is not None]
    scored = [(d, y) for d, y in scored if d is not None]
    return auc([d for d, _ in scored], [y for _, y in scored])


def signal_metrics(sums: dict[str, float], agree_auc: float | None = None) -> dict[str, float]:
    """`teacher/{part}[/{subset}]/delta` (mean shift, nats per token) and `.../gate_open` (share with gate > 0.5)
    for the subsets that have tokens; `teacher/skill_lift` (agreeing minus disagreeing action tokens' mean shift)
    and `teacher/agree_auc` where the expert's moves are known."""
    out: dict[str, float] = {}
    for p in PARTS:
        for k in SUBSETS:
            n = sums.get(f"{p}/{k}/tokens", 0.0)
            if n:
                name = f"teacher/{p}" + ("" if k == "all" else f"/{k}")
                out[f"{name}/delta"] = sums[f"{p}/{k}/delta_sum"] / n
                out[f"{name}/gate_open"] = sums[f"{p}/{k}/raised"] / n
    if "teacher/action/agree/delta" in out and "teacher/action/disagree/delta" in out:
        out["teacher/skill_lift"] = out["teacher/action/agree/delta"] - out["teacher/action/disagree/delta"]
    if agree_auc is not None:
        out["teacher/agree_auc"] = agree_auc
    return out
