"""How rows are grouped for the backend: length buckets for prefill, prefix stages and token-budget micro-batches
for scoring. Pure functions of token ids and lengths."""

from __future__ import annotations


def length_buckets(lengths: list[int], max_padding: float = 0.1) -> list[list[int]]:
    """Indices grouped by length (ascending) so that each group's padded size, rows x longest, exceeds its real
    tokens by at most `max_padding`: the prompts of an analysis batch differ in length several-fold, and a single
    left-padded prefill would spend much of its work on padding."""
    groups: list[list[int]] = []
    real = 0
    for i in sorted(range(len(lengths)), key=lambda i: lengths[i]):
        if groups and (len(groups[-1]) + 1) * lengths[i] <= (1 + max_padding) * (real + lengths[i]):
            groups[-1].append(i)
            real += lengths[i]
        else:
            groups.append([i])
            real = lengths[i]
    return groups


def prefix_stages(
    uniq: list[list[int]], shared: int, min_gain: int | None = 16
) -> list[tuple[list[list[int]], list[int]]]:
    """The segments `forward_logps` runs, stage by stage, each row with the index of the previous stage's row it
    continues: the common prefix (one row); then, where prompts fall into groups sharing at least `min_gain`
    more tokens (None: never), each group's extra prefix (one row per group, empty for prompts in no group);
    then every prompt's remainder (>= 1 token each)."""
    stages = [([uniq[0][:shared]], [])] if shared else []
    if min_gain is None:
        return stages + [([p[shared:] for p in uniq], [0] * len(uniq))]
    groups: list[list[int]] = []  # members, in lexicographic order: a group's common prefix is first vs last's
    for u in sorted(range(len(uniq)), key=lambda u: uniq[u]):
        first = uniq[groups[-1][0]] if groups else []
        if groups and common_prefix_length([first, uniq[u]], min(len(first), len(uniq[u])) - 1) >= shared + min_gain:
            groups[-1].append(u)
        else:
            groups.append([u])
    if not shared or all(len(g) == 1 for g in groups):  # (without a shared stage an empty segment has no context)
        return stages + [([p[shared:] for p in uniq], [0] * len(uniq))]
    ends, group_of = [shared] * len(uniq), [0] * len(uniq)
    for gi, members in enumerate(groups):
        if len(members) > 1:
            first, last = uniq[members[0]], uniq[members[-1]]
            end = common_prefix_length([first, last], limit=min(len(uniq[m]) for m in members) - 1)
            for m in members:
                ends[m] = end
        for m in members:
            group_of[m] = gi
    stages.append(([uniq[g[0]][shared : ends[g[0]]] for g in groups], [0] * len(groups)))
    stages.append(([p[ends[u] :] for u, p in enumerate(uniq)], group_of))
    return stages


def distinct_rows(rows: list[tuple]) -> tuple[list[tuple], list[int]]:
    """The distinct rows in first-seen order, and for every row the index of its distinct row: repeated prompts
    (and prompt-response pairs) run once and share the result."""
    index: dict[tuple, int] = {}
    of_row = [index.setdefault(row, len(index)) for row in rows]
    return list(index), of_row


def common_prefix_length(seqs: list[list[int]], limit: int) -> int:
    first, n = seqs[0], 0
    while n < limit and all(s[n] == first[n] for s in seqs[1:]):
        n += 1
    return n


def prompt_sharing_batches(prompts: list[list[int]], responses: list[list[int]], budget: int) -> list[list[int]]:
    """Micro-batches for `forward_logps`: identical prompts land in the same batch (so they are run once), and a
    batch's padded work, distinct prompts x longest prompt + rows x longest response, stays within budget."""
    order = sorted(range(len(prompts)), key=lambda i: (len(prompts[i]), prompts[i]))
    groups: list[list[int]] = []
    cur: list[int] = []
    distinct: set[tuple[int, ...]] = set()
    width = rwidth = 0  # longest prompt and response in `cur`
    for i in order:
        key = tuple(prompts[i])
        n_distinct = len(distinct) + (key not in distinct)
        w, rw = max(width, len(prompts[i])), max(rwidth, len(responses[i]))
        if cur and n_distinct * w + (len(cur) + 1) * rw > budget:
            groups.append(cur)
            cur, distinct = [], set()
            w, rw = len(prompts[i]), len(responses[i])
        cur.append(i)
        distinct.add(key)
        width, rwidth = w, rw
    if cur:
        groups.append(cur)
    return groups


def token_budget_batches(lengths: list[int], budget: int) -> list[list[int]]:
    """Group indices (sorted by length) so that each group's padded size (n x max length) stays within budget."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    groups: list[list[int]] = []
    cur: list[int] = []
    for i in order:
        if cur and (len(cur) + 1) * max(lengths[i], lengths[cur[-1]]) > budget:
            groups.append(cur)
            cur = []
        cur.append(i)
    if cur:
        groups.append(cur)
    return groups
