"""Sokoban with the project's own generator and BFS solver, shown as text, as an RGB frame, or both.

Rooms are made by reverse play: boxes start on their targets and the player *pulls* them away, so every room is
solvable by construction. The same (split, seed) always gives the same room. `render="rgb"` is the paper's visual
Sokoban: the observation is a frame of the room (`draw_room`) and its text only says so; `"both"` keeps the text
grid beside the frame.
"""

from __future__ import annotations

import random
from collections import deque
from typing import TYPE_CHECKING

from seed.envs.base import Obs, register

if TYPE_CHECKING:  # Pillow is imported where a frame is drawn: a text env needs only the standard library
    from PIL import Image

MOVES = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}
_SPLIT_OFFSET = {"train": 0, "valid_seen": 1_000_003, "valid_unseen": 2_000_003}
LEGEND = "# wall, _ floor, O target, X box, √ box on target, P you, S you on target"
RENDER_MODES = ("text", "rgb", "both")
RGB_INTRO = "You are an expert agent playing Sokoban on a grid shown as an image."
FRAME_LEGEND = "dark grey wall, light floor, red ring target, brown box, green box on target, blue disc you"
COLOURS = {"wall": (70, 70, 70), "floor": (225, 220, 205), "target": (200, 30, 30), "box": (150, 95, 40)}
COLOURS |= {"box_on_target": (40, 160, 60), "player": (40, 80, 210)}


class SokobanRoom:
    """Static layout (walls, targets) plus the dynamic state (player, boxes)."""

    def __init__(self, walls: set, targets: frozenset, player: tuple, boxes: frozenset, size: int):
        self.walls, self.targets, self.player, self.boxes, self.size = walls, targets, player, boxes, size

    def solved(self) -> bool:
        return self.boxes == self.targets

    def move(self, action: str) -> bool:
        """Apply a move; returns False when nothing changed (wall or blocked box)."""
        dr, dc = MOVES[action]
        nxt = (self.player[0] + dr, self.player[1] + dc)
        if nxt in self.walls:
            return False
        if nxt in self.boxes:
            beyond = (nxt[0] + dr, nxt[1] + dc)
            if beyond in self.walls or beyond in self.boxes:
                return False
            self.boxes = (self.boxes - {nxt}) | {beyond}
        self.player = nxt
        return True

    def render(self) -> str:
        rows = []
        for r in range(self.size):
            row = ""
            for c in range(self.size):
                p = (r, c)
                if p in self.walls:
                    row += "#"
                elif p == self.player:
                    row += "S" if p in self.targets else "P"
                elif p in self.boxes:
                    row += "√" if p in self.targets else "X"
                elif p in self.targets:
                    row += "O"
                else:
                    row += "_"
            rows.append(row)
        return "\n".join(rows)


def draw_room(room: SokobanRoom, cell: int = 16) -> Image.Image:
    """The room as an RGB frame, `cell` pixels per square (`FRAME_LEGEND` names the colours)."""
    from PIL import Image, ImageDraw

    frame = Image.new("RGB", (room.size * cell, room.size * cell), COLOURS["floor"])
    draw = ImageDraw.Draw(frame)
    for r in range(room.size):
        for c in range(room.size):
            box = (c * cell, r * cell, (c + 1) * cell - 1, (r + 1) * cell - 1)
            inner = (box[0] + 3, box[1] + 3, box[2] - 3, box[3] - 3)
            if (r, c) in room.walls:
                draw.rectangle(box, fill=COLOURS["wall"])
                continue
            if (r, c) in room.targets:
                draw.ellipse(box, outline=COLOURS["target"], width=2)
            if (r, c) in room.boxes:
                draw.rectangle(inner, fill=COLOURS["box_on_target" if (r, c) in room.targets else "box"])
            elif (r, c) == room.player:
                draw.ellipse(inner, fill=COLOURS["player"])
    return frame


def generate_room(
    seed: int, size: int = 6, num_boxes: int = 1, reverse_steps: int = 12, max_tries: int = 200
) -> SokobanRoom:
    """Random walls inside a border, boxes on targets, then random reverse moves (pulls)."""
    rng = random.Random(seed)
    for _ in range(max_tries):
        walls = {(r, c) for r in range(size) for c in range(size) if r in (0, size - 1) or c in (0, size - 1)}
        interior = [(r, c) for r in range(1, size - 1) for c in range(1, size - 1)]
        for cell in rng.sample(interior, k=rng.randint(0, max(0, len(interior) // 8))):
            walls.add(cell)
        free = [p for p in interior if p not in walls]
        if len(free) < num_boxes + 2:
            continue
        picks = rng.sample(free, k=num_boxes + 1)
        targets = frozenset(picks[:num_boxes])
        boxes, player = set(targets), picks[-1]
        for _ in range(reverse_steps):
            dr, dc = MOVES[rng.choice(list(MOVES))]
            nxt = (player[0] + dr, player[1] + dc)
            if nxt in walls or nxt in boxes:
                continue
            behind = (player[0] - dr, player[1] - dc)
            if behind in boxes and rng.random() < 0.8:  # pull the box along
                boxes = (boxes - {behind}) | {player}
            player = nxt
        room = SokobanRoom(walls, targets, player, frozenset(boxes), size)
        if not room.solved() and solve(room) is not None:
            return room
    raise RuntimeError(f"could not generate a sokoban room for seed {seed}")


def solve(room: SokobanRoom, max_states: int = 200_000) -> list[str] | None:
    """Breadth-first search over (player, boxes); returns a shortest move list or None."""
    start = (room.player, room.boxes)
    parents: dict = {start: None}
    queue = deque([start])
    while queue and len(parents) < max_states:
        state = queue.popleft()
        if state[1] == room.targets:
            plan = []
            while parents[state] is not None:
                state, action = parents[state]
                plan.append(action)
            return plan[::-1]
        for action in MOVES:
            probe = SokobanRoom(room.walls, room.targets, state[0], state[1], room.size)
            if probe.move(action):
                nxt = (probe.player, probe.boxes)
                if nxt not in parents:
                    parents[nxt] = (state, action)
                    queue.append(nxt)
    return None


def _offset(cell: tuple, origin: tuple, name: str = "you") -> str:
    """'2 steps up and 1 step left from you': where `cell` is, seen from `origin`."""
    dr, dc = cell[0] - origin[0], cell[1] - origin[1]
    steps = lambda n, word: f"{abs(n)} step{'s' if abs(n) > 1 else ''} {word}"  # noqa: E731
    parts = ([steps(dr, "down" if dr > 0 else "up")] if dr else []) + (
        [steps(dc, "right" if dc > 0 else "left")] if dc else []
    )
    return f"{' and '.join(parts)} from {name}" if parts else f"at the same place as {name}"


@register(
    "sokoban",
    "Sokoban, 6x6 with 1 box by default, as text, an RGB frame or both; rooms generated by reverse play (solvable)",
    choices={"render": RENDER_MODES},
)
class SokobanEnv:
    name = "sokoban"
    intro = "You are an expert agent playing Sokoban on a text grid."

    def __init__(
        self, split: str = "train", size: int = 6, num_boxes: int = 1, reverse_steps: int = 12, render: str = "text"
    ):
        if render not in RENDER_MODES:
            raise ValueError(f"render={render!r}; allowed: {', '.join(RENDER_MODES)}")
        self.split, self.size, self.num_boxes, self.reverse_steps = split, size, num_boxes, reverse_steps
        self.render = render
        self.room: SokobanRoom | None = None

    def _obs(self) -> Obs:
        assert self.room is not None
        one = self.num_boxes == 1
        task = f"push {'the box' if one else 'every box'} onto {'the target' if one else 'a target'}"
        text = f"{LEGEND}\n{self.room.render()}\n{self._positions()}"
        if self.render == "rgb":  # the frame alone shows the room
            text = f"The grid is shown in the image ({FRAME_LEGEND})."
        return Obs(
            text=text,
            task=task,
            admissible=list(MOVES),
            won=self.room.solved(),
            task_type="sokoban",
            images=[draw_room(self.room)] if self.render != "text" else [],
            intro=RGB_INTRO if self.render == "rgb" else "",
        )

    def _positions(self) -> str:
        """The grid in words, relative to the player (and the target relative to the box).

        Small models cannot do coordinate arithmetic; "the box is 1 step left from you" states the same fact as the
        grid in the form a language model can act on.
        """
        room = self.room
        lines = []
        for box in sorted(room.boxes):
            if box in room.targets:
                lines.append(f"A box at {_offset(box, room.player)} is on a target.")
                continue
            free = sorted(room.targets - room.boxes, key=lambda t: abs(t[0] - box[0]) + abs(t[1] - box[1]))
            lines.append(
                f"The box is {_offset(box, room.player)}; the nearest free target is "
                f"{_offset(free[0], box, 'the box')}."
            )
        return " ".join(lines)

    def reset(self, seed: int) -> Obs:
        self.room = generate_room(seed + _SPLIT_OFFSET[self.split], self.size, self.num_boxes, self.reverse_steps)
        return self._obs()

    def step(self, action: str) -> tuple[Obs, float, bool, dict]:
        if self.room is None:
            raise RuntimeError("call reset() before step()")
        action = action.strip().lower()
        valid = action in MOVES
        if valid:
            self.room.move(action)
        obs = self._obs()
        return obs, float(obs.won), obs.won, {"valid": valid, "won": obs.won}

    def expert_plan(self) -> list[str]:
        if self.room is None:
            raise RuntimeError("call reset() before expert_plan()")
        return solve(self.room) or []

    def close(self) -> None:
        self.room = None
