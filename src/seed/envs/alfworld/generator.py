"""The project's own ALFWorld problem generator: PDDL problems for all six task types over generated rooms.

A room is a set of receptacles (each at its own location) holding objects. The goal comes from ALFWorld's own
goal library, the domain and grammar from the `alfworld` package, so the official engine runs the game and its
planner supplies the expert. Splits are deterministic: `train` and `valid_seen` draw from the same
(task type, object, receptacle, room) combinations with disjoint seeds; `valid_unseen` draws only from
combinations held out of the other two.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass, field

TASK_TYPES = (
    "pick_and_place_simple",
    "look_at_obj_in_light",
    "pick_clean_then_place_in_recep",
    "pick_heat_then_place_in_recep",
    "pick_cool_then_place_in_recep",
    "pick_two_obj_and_place",
)

# object type -> abilities (clean/heat/cool); every object listed is pickupable
OBJECTS: dict[str, frozenset] = {
    k: frozenset(v)
    for k, v in {
        "Apple": "chc",
        "Tomato": "chc",
        "Potato": "chc",
        "Egg": "chc",
        "Bread": "hc",
        "Lettuce": "cc",
        "Mug": "chc",
        "Cup": "chc",
        "Plate": "chc",
        "Bowl": "chc",
        "Pan": "cc",
        "Pot": "cc",
        "Fork": "c",
        "Spoon": "c",
        "Knife": "c",
        "Spatula": "c",
        "Ladle": "c",
        "Cloth": "c",
        "SoapBar": "c",
        "Book": "",
        "CellPhone": "",
        "KeyChain": "",
        "Pen": "",
        "Pencil": "",
        "CD": "",
        "Watch": "",
        "RemoteControl": "",
        "CreditCard": "",
        "Vase": "",
        "Candle": "",
        "Pillow": "",
        "Newspaper": "",
        "TissueBox": "",
        "SprayBottle": "",
        "Statue": "",
        "AlarmClock": "",
    }.items()
}
CLEANABLE = {o for o, a in OBJECTS.items() if "c" in a and o not in ("Bread",)}
HEATABLE = {o for o, a in OBJECTS.items() if "h" in a}
COOLABLE = {"Apple", "Tomato", "Potato", "Egg", "Bread", "Lettuce", "Mug", "Cup", "Plate", "Bowl", "Pan", "Pot"}
FOOD_AND_DISHES = {"Apple", "Tomato", "Potato", "Egg", "Bread", "Lettuce", "Mug", "Cup", "Plate", "Bowl"}
SOFT_SPOTS = {"Book", "CellPhone", "KeyChain", "RemoteControl", "CreditCard", "Pillow", "Newspaper"}

# receptacle type -> (openable, which objects it can hold: None means any object)
RECEPTACLES: dict[str, tuple[bool, frozenset | None]] = {
    "CounterTop": (False, None),
    "DiningTable": (False, None),
    "SideTable": (False, None),
    "Desk": (False, None),
    "Shelf": (False, None),
    "Dresser": (False, None),
    "CoffeeTable": (False, None),
    "Drawer": (True, None),
    "Cabinet": (True, None),
    "Safe": (True, None),
    "Bed": (False, frozenset(SOFT_SPOTS)),
    "Sofa": (False, frozenset(SOFT_SPOTS)),
    "ArmChair": (False, frozenset(SOFT_SPOTS)),
    "GarbageCan": (
        False,
        frozenset({"Apple", "Tomato", "Potato", "Egg", "Bread", "Newspaper", "CD", "Pen", "Pencil", "TissueBox"}),
    ),
    "Fridge": (True, frozenset(COOLABLE)),
    "Microwave": (True, frozenset(FOOD_AND_DISHES)),
    "SinkBasin": (False, frozenset(CLEANABLE)),
    "StoveBurner": (False, frozenset({"Pan", "Pot"})),
}
LAMP_HOLDERS = ("SideTable", "Desk", "Dresser")
ROOMS: dict[str, tuple[str, ...]] = {
    "kitchen": ("CounterTop", "DiningTable", "Drawer", "Cabinet", "Shelf", "GarbageCan", "StoveBurner"),
    "livingroom": ("CoffeeTable", "Sofa", "ArmChair", "SideTable", "Shelf", "Drawer", "Cabinet", "GarbageCan"),
    "bedroom": ("Bed", "Desk", "Dresser", "SideTable", "Shelf", "Drawer", "Safe", "GarbageCan"),
    "office": ("Desk", "Shelf", "Drawer", "Cabinet", "Safe", "SideTable", "ArmChair", "GarbageCan"),
}
_SPLIT_SALT = {"train": "tr", "valid_seen": "vs", "valid_unseen": "vu"}


def _hash(*parts: object) -> int:
    return int(hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()[:12], 16)


def is_unseen_combo(task_type: str, obj: str, recep: str, room: str) -> bool:
    """About one combination in four is held out for `valid_unseen`."""
    return _hash("unseen", task_type, obj, recep, room) % 4 == 0


def _can_hold(recep: str, obj: str) -> bool:
    allowed = RECEPTACLES[recep][1]
    return allowed is None or obj in allowed


@dataclass
class Problem:
    """A generated task: the PDDL problem plus what the traj_data.json and the oracle need."""

    task_type: str
    room: str
    obj: str
    recep: str  # goal receptacle type ("" for look_at_obj_in_light)
    toggle: str  # "DeskLamp" for look_at_obj_in_light
    pddl: str
    receptacles: list[str] = field(default_factory=list)
    objects: list[str] = field(default_factory=list)

    def traj_data(self) -> dict:
        return {
            "task_type": self.task_type,
            "pddl_params": {
                "object_target": self.obj,
                "parent_target": self.recep,
                "toggle_target": self.toggle,
                "mrecep_target": "",
                "object_sliced": False,
            },
        }


def _candidates(task_type: str, room: str) -> list[tuple[str, str]]:
    """(object, goal receptacle) pairs that make sense for the task type in this room."""
    if task_type == "look_at_obj_in_light":
        return [(o, "") for o in OBJECTS if o not in ("Pot", "Pan")]
    if task_type == "pick_clean_then_place_in_recep":
        objs = CLEANABLE
    elif task_type == "pick_heat_then_place_in_recep":
        objs = HEATABLE
    elif task_type == "pick_cool_then_place_in_recep":
        objs = COOLABLE
    else:
        objs = set(OBJECTS)
    receps = [r for r in ROOMS[room] if r not in ("Drawer", "Cabinet", "Safe") or task_type == "pick_and_place_simple"]
    return [(o, r) for o in sorted(objs) for r in receps if _can_hold(r, o)]


def generate_problem(
    split: str, index: int, task_type: str | None = None, num_receptacles: int = 6, num_distractors: int = 4
) -> Problem:
    """Deterministic problem number `index` of `split` (task types cycle unless one is given)."""
    if split not in _SPLIT_SALT:
        raise ValueError(f"unknown split {split!r}; allowed: {', '.join(_SPLIT_SALT)}")
    task_type = task_type or TASK_TYPES[index % len(TASK_TYPES)]
    if task_type not in TASK_TYPES:
        raise ValueError(f"unknown task type {task_type!r}; allowed: {', '.join(TASK_TYPES)}")
    rng = random.Random(_hash(_SPLIT_SALT[split], task_type, index))
    want_unseen = split == "valid_unseen"
    while True:
        room = rng.choice(sorted(ROOMS))
        pairs = [p for p in _candidates(task_type, room) if is_unseen_combo(task_type, p[0], p[1], room) == want_unseen]
        if pairs:
            break
    obj, recep = rng.choice(pairs)
    return _build(rng, task_type, room, obj, recep, num_receptacles, num_distractors)


def _build(
    rng: random.Random, task_type: str, room: str, obj: str, recep: str, num_receptacles: int, num_distractors: int
) -> Problem:
    # receptacles: the goal one, the appliance the task needs, then room furniture
    needed = [r for r in (recep,) if r]
    appliance = {
        "pick_clean_then_place_in_recep": "SinkBasin",
        "pick_heat_then_place_in_recep": "Microwave",
        "pick_cool_then_place_in_recep": "Fridge",
    }.get(task_type)
    if appliance:
        needed.append(appliance)
    if task_type == "look_at_obj_in_light":
        needed.append(rng.choice([r for r in LAMP_HOLDERS if r in ROOMS[room]] or ["SideTable"]))
    pool = list(ROOMS[room])
    starts = [r for r in pool if _can_hold(r, obj) and r not in needed] or ["Shelf"]
    needed.append(rng.choice(starts))  # somewhere the target object can start out
    receps = list(needed)
    while len(receps) < max(num_receptacles, len(needed) + 1):
        receps.append(rng.choice(pool))
    rng.shuffle(receps)

    # objects: the target (two for pick_two), distractors, a lamp for the light task
    n_target = 2 if task_type == "pick_two_obj_and_place" else 1
    placed: list[tuple[str, int]] = []  # (object type, receptacle index)
    start_spots = [i for i, r in enumerate(receps) if _can_hold(r, obj) and r != recep and r != appliance]
    if not start_spots:
        start_spots = [i for i, r in enumerate(receps) if RECEPTACLES[r][1] is None and r != recep]
    for _ in range(n_target):
        placed.append((obj, rng.choice(start_spots)))
    if task_type == "look_at_obj_in_light":
        holder = next(i for i, r in enumerate(receps) if r in LAMP_HOLDERS or r == needed[-1])
        placed.append(("DeskLamp", holder))
    distractor_types = [o for o in OBJECTS if o != obj]
    for _ in range(num_distractors):
        o = rng.choice(distractor_types)
        spots = [i for i, r in enumerate(receps) if _can_hold(r, o)]
        if spots:
            placed.append((o, rng.choice(spots)))

    # ALFRED ids: "Type|x|y|z"; a sink basin is "Sink|x|y|z|SinkBasin", which the demangler names "sinkbasin"
    recep_ids = [
        f"{'Sink' if r == 'SinkBasin' else r}_bar__plus_0{i // 10}_dot_{i % 10}0_bar__plus_00_dot_00"
        f"_bar__plus_00_dot_00{'_bar_SinkBasin' if r == 'SinkBasin' else ''}"
        for i, r in enumerate(receps)
    ]
    obj_ids = [
        f"{o}_bar__plus_01_dot_{k:02d}_bar__plus_00_dot_00_bar__plus_00_dot_00" for k, (o, _) in enumerate(placed)
    ]
    locs = [f"loc{i}" for i in range(len(receps))]
    start = f"loc{len(receps)}"

    facts = ["(atLocation agent1 " + start + ")"]
    for rid, r, loc in zip(recep_ids, receps, locs):
        facts.append(f"(receptacleAtLocation {rid} {loc})")
        facts.append(f"(receptacleType {rid} {r}Type)")
        if RECEPTACLES[r][0]:
            facts.append(f"(openable {rid})")
    for oid, (o, ri) in zip(obj_ids, placed):
        facts += [
            f"(inReceptacle {oid} {recep_ids[ri]})",
            f"(objectAtLocation {oid} {locs[ri]})",
            f"(objectType {oid} {o}Type)",
        ]
        if o == "DeskLamp":
            facts.append(f"(toggleable {oid})")
            continue
        facts.append(f"(pickupable {oid})")
        if o in CLEANABLE:
            facts.append(f"(cleanable {oid})")
        if o in HEATABLE:
            facts.append(f"(heatable {oid})")
        if o in COOLABLE:
            facts.append(f"(coolable {oid})")
    otypes = sorted({o for o, _ in placed} | {obj})  # only the types in the room keep the planner fast
    rtypes = sorted(set(receps) | ({recep} if recep else set()))
    for rt in rtypes:
        for ot in otypes:
            if ot != "DeskLamp" and _can_hold(rt, ot):
                facts.append(f"(canContain {rt}Type {ot}Type)")

    import alfworld.gen.goal_library as goals  # the official goal definitions

    goal = goals.gdict[task_type]["pddl"].replace("#", "-").format(obj=obj, recep=recep, toggle="DeskLamp", mrecep="")
    pddl = (
        "(define (problem plan_seed)\n(:domain alfred)\n(:objects\n agent1 - agent\n"
        + "".join(f" {t}Type - otype\n" for t in sorted(set(otypes) | {"DeskLamp"}))
        + "".join(f" {t}Type - rtype\n" for t in rtypes)
        + "".join(f" {oid} - object\n" for oid in obj_ids)
        + "".join(f" {rid} - receptacle\n" for rid in recep_ids)
        + "".join(f" {loc} - location\n" for loc in locs + [start])
        + ")\n(:init\n"
        + "\n".join(" " + f for f in facts)
        + "\n)\n"
        + goal
    )
    return Problem(
        task_type,
        room,
        obj,
        recep,
        "DeskLamp" if task_type == "look_at_obj_in_light" else "",
        pddl,
        receps,
        [o for o, _ in placed],
    )


def game_json(problem: Problem, domain: str, grammar: str) -> str:
    """The `game.tw-pddl` document the TextWorld PDDL engine loads."""
    from alfworld.agents.utils.misc import add_task_to_grammar

    rng = random.Random(_hash(problem.pddl))
    return json.dumps(
        {
            "pddl_domain": domain,
            "grammar": add_task_to_grammar(grammar, problem.traj_data(), rng=rng),
            "pddl_problem": problem.pddl,
            "solvable": True,
        }
    )
