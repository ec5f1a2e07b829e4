"""EZPoints: two playing cards; build a formula that makes 12 from their numbers, one token per step.

The project's own implementation of the cards game the paper and verl-agent train on (gym_cards' EZPoints). A card
counts its face value; J, Q and K count 10 and an ace 1. Each step appends one token of "1"…"10", "+", "*", "="
to the formula; "=" evaluates it and ends the episode, which is won when the formula is one card number, an
operator and the other card number, and equals 12. A token that cannot be appended (a number not on the cards or
used already, two numbers or two operators in a row) changes nothing and is flagged invalid.

Every task is a deal with a solution. The deals are the ordered rank pairs that make 12 by "+" or "*", each with
any suits; `valid_unseen` deals rank pairs that `train` and `valid_seen` never show (`UNSEEN_RANK_PAIRS`).
Observations are text (`render="text"`: the cards and their numbers in words), an image of the two cards
(`render="rgb"`: the text then says only the formula), or both.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from seed.envs.base import Obs, register

if TYPE_CHECKING:  # Pillow is imported where cards are drawn: the text game needs only the standard library
    from PIL import Image, ImageDraw, ImageFont

TARGET = 12
RANKS = ("A", "2", "3", "4", "5", "6", "7", "8", "9", "10", "J", "Q", "K")
SUITS = ("spades", "hearts", "diamonds", "clubs")
NUMBERS = tuple(str(n) for n in range(1, 11))
OPERATORS = ("+", "*")
TOKENS = (*NUMBERS, *OPERATORS, "=")
RENDER_MODES = ("text", "rgb", "both")
_SPLIT_OFFSET = {"train": 0, "valid_seen": 1_000_003, "valid_unseen": 2_000_003}


def card_value(rank: str) -> int:
    return 1 if rank == "A" else 10 if rank in ("J", "Q", "K") else int(rank)


def solving_rank_pairs() -> list[tuple[str, str]]:
    """Every ordered pair of ranks whose numbers make `TARGET` with one operator."""
    return [
        (a, b)
        for a in RANKS
        for b in RANKS
        if card_value(a) + card_value(b) == TARGET or card_value(a) * card_value(b) == TARGET
    ]


UNSEEN_RANK_PAIRS = (("K", "2"), ("9", "3"), ("7", "5"), ("4", "3"))  # never dealt in train or valid_seen


def deal(split: str, seed: int) -> tuple[tuple[str, str], tuple[str, str]]:
    """The (rank, suit) of the left and right card of task `seed` in `split`."""
    rng = random.Random(seed + _SPLIT_OFFSET[split])
    unseen = split == "valid_unseen"
    pairs = [p for p in solving_rank_pairs() if (p in UNSEEN_RANK_PAIRS) == unseen]
    left, right = rng.choice(pairs)
    return (left, rng.choice(SUITS)), (right, rng.choice(SUITS))


def solution(numbers: tuple[int, int]) -> list[str]:
    """The tokens of one winning formula, left card first, then "="."""
    a, b = numbers
    op = "+" if a + b == TARGET else "*"
    return [str(a), op, str(b), "="]


def evaluate(formula: list[str], numbers: tuple[int, int]) -> bool:
    """Whether the formula is card number, operator, the other card number, and equals `TARGET`."""
    if len(formula) != 3 or formula[1] not in OPERATORS or sorted(formula[::2]) != sorted(map(str, numbers)):
        return False
    a, b = int(formula[0]), int(formula[2])
    return (a + b if formula[1] == "+" else a * b) == TARGET


def appendable(formula: list[str], numbers: tuple[int, int]) -> set[str]:
    """The tokens that may follow `formula`: an unused card number after nothing or an operator; an operator or
    "=" after a number; "=" also at the start (it ends the episode, unwon)."""
    if not formula or formula[-1] in OPERATORS:
        unused = list(map(str, numbers))
        for token in formula[::2]:
            if token in unused:
                unused.remove(token)
        return set(unused) | ({"="} if not formula else set())
    return {*OPERATORS, "="} if len(formula) < 3 else {"="}


def draw_cards(cards: tuple[tuple[str, str], tuple[str, str]], card_size: tuple[int, int] = (64, 96)) -> Image.Image:
    """Two cards side by side on a green table: the rank in the corners and a suit mark in the middle."""
    from PIL import Image, ImageDraw

    width, height = card_size
    margin = 8
    table = Image.new("RGB", (2 * width + 3 * margin, height + 2 * margin), (34, 110, 60))
    draw = ImageDraw.Draw(table)
    font = _rank_font()
    for i, (rank, suit) in enumerate(cards):
        x0, y0 = margin + i * (width + margin), margin
        draw.rounded_rectangle((x0, y0, x0 + width - 1, y0 + height - 1), radius=6, fill="white", outline="black")
        colour = (200, 20, 20) if suit in ("hearts", "diamonds") else (10, 10, 10)
        draw.text((x0 + 5, y0 + 3), rank, fill=colour, font=font)
        draw.text((x0 + width - 5, y0 + height - 3), rank, fill=colour, font=font, anchor="rd")
        _suit_mark(draw, suit, (x0 + width // 2, y0 + height // 2), width // 5, colour)
    return table


def _rank_font() -> ImageFont.ImageFont | ImageFont.FreeTypeFont:
    """Pillow's embedded font at a readable size (the bitmap default where Pillow lacks FreeType)."""
    from PIL import ImageFont

    try:
        return ImageFont.load_default(size=18)
    except (TypeError, ImportError, OSError):
        return ImageFont.load_default()


def _suit_mark(draw: ImageDraw.ImageDraw, suit: str, centre: tuple[int, int], r: int, colour) -> None:
    cx, cy = centre
    if suit == "diamonds":
        draw.polygon([(cx, cy - r), (cx + r, cy), (cx, cy + r), (cx - r, cy)], fill=colour)
    elif suit == "hearts":
        draw.ellipse((cx - r, cy - r, cx, cy), fill=colour)
        draw.ellipse((cx, cy - r, cx + r, cy), fill=colour)
        draw.polygon([(cx - r, cy - r // 2), (cx + r, cy - r // 2), (cx, cy + r)], fill=colour)
    elif suit == "spades":
        draw.polygon([(cx, cy - r), (cx + r, cy + r // 3), (cx - r, cy + r // 3)], fill=colour)
        draw.rectangle((cx - 1, cy, cx + 1, cy + r), fill=colour)
    else:  # clubs
        for dx, dy in ((0, -r // 2), (-r // 2, r // 4), (r // 2, r // 4)):
            draw.ellipse((cx + dx - r // 2, cy + dy - r // 2, cx + dx + r // 2, cy + dy + r // 2), fill=colour)
        draw.rectangle((cx - 1, cy, cx + 1, cy + r), fill=colour)


@register(
    "ezpoints",
    "EZPoints: make 12 from two playing cards, one formula token per step (render text, rgb or both)",
    choices={"render": RENDER_MODES},
)
class EZPointsEnv:
    name = "ezpoints"
    intro = "You are an expert card game player building a formula that evaluates to 12 from two playing cards."

    def __init__(self, split: str = "train", render: str = "text"):
        if render not in RENDER_MODES:
            raise ValueError(f"render={render!r}; allowed: {', '.join(RENDER_MODES)}")
        self.split, self.render = split, render
        self.cards: tuple[tuple[str, str], tuple[str, str]] | None = None
        self.formula: list[str] = []
        self.ended = False  # "=" was appended: the formula was evaluated

    @property
    def numbers(self) -> tuple[int, int]:
        assert self.cards is not None
        return card_value(self.cards[0][0]), card_value(self.cards[1][0])

    def _obs(self, won: bool = False) -> Obs:
        assert self.cards is not None
        shown = f"The current formula is: '{''.join(self.formula)}'."
        in_words = (
            f"Cards: {[rank for rank, _ in self.cards]}. Numbers: {list(self.numbers)}. "
            if self.render != "rgb"
            else "The two cards are shown in the image. "
        )
        return Obs(
            text=f"{in_words.rstrip()}\n{shown} Append the next token.",  # the last line says where the formula is
            task=f"build a formula that evaluates to {TARGET} using each of the two card numbers once",
            admissible=list(TOKENS),  # the whole vocabulary: which numbers fit is what the cards say
            won=won,
            task_type="ezpoints",
            images=[draw_cards(self.cards)] if self.render != "text" else [],
        )

    def reset(self, seed: int) -> Obs:
        self.cards, self.formula, self.ended = deal(self.split, seed), [], False
        return self._obs()

    def step(self, action: str) -> tuple[Obs, float, bool, dict]:
        if self.cards is None:
            raise RuntimeError("call reset() before step()")
        token = action.strip()
        valid = not self.ended and token in appendable(self.formula, self.numbers)
        if not valid:
            return self._obs(), 0.0, False, {"valid": False, "won": False}
        if token != "=":
            self.formula.append(token)
            return self._obs(), 0.0, False, {"valid": True, "won": False}
        self.ended = True
        won = evaluate(self.formula, self.numbers)
        return self._obs(won), float(won), True, {"valid": True, "won": won}

    def expert_plan(self) -> list[str]:
        """The rest of the winning formula from here; [] once the formula can no longer win."""
        if self.cards is None:
            raise RuntimeError("call reset() before expert_plan()")
        if self.ended:
            return []
        for order in (self.numbers, self.numbers[::-1]):
            full = solution(order)
            if full[: len(self.formula)] == self.formula:
                return full[len(self.formula) :]
        return []

    def close(self) -> None:
        self.cards = None
