"""A stand-in for WebShop's text environment (`web_agent_site.envs.WebAgentTextEnv`) over a handful of made-up
products: the same interface (reset(session), step(action), get_available_actions(), server.goals and
server.user_sessions[session]["goal"], observation) and page flow (search page -> results -> item -> bought),
with WebShop's `[SEP]`-joined text pages and a score in [0, 1]. WebShop's data cannot be fetched here."""

from __future__ import annotations

PRODUCTS = [  # asin, title, price, {option kind: values}
    ("b0001", "trail running shoe", 35.0, {"color": ["red", "blue"], "size": ["8", "9", "10"]}),
    ("b0002", "leather hiking boot", 89.0, {"color": ["brown", "black"], "size": ["9", "10"]}),
    ("b0003", "cotton crew sock pack", 12.0, {"color": ["white", "grey"]}),
    ("b0004", "wool winter beanie", 18.0, {"color": ["green", "navy"]}),
    ("b0005", "waterproof rain jacket", 60.0, {"color": ["yellow", "black"], "size": ["m", "l"]}),
    ("b0006", "canvas tote bag", 22.0, {}),
]


def _goals() -> list[dict]:
    goals = []
    for k in range(2000):  # enough for WebShop's split boundaries (0-499, 500-1499, 1500-)
        asin, title, price, options = PRODUCTS[k % len(PRODUCTS)]
        turn = k // len(PRODUCTS)
        chosen = {kind: values[(turn + i) % len(values)] for i, (kind, values) in enumerate(options.items())}
        words = " ".join(chosen.values())
        wanted = f"{words} {title}" if words else title
        goals.append(
            {
                "asin": asin,
                "query": title,
                "goal_options": chosen,
                "instruction_text": f"i need a {wanted}, price lower than {price + 10:.2f} dollars",
            }
        )
    return goals


class _Server:
    def __init__(self):
        self.goals = _goals()
        self.user_sessions: dict = {}


class StandinTextEnv:
    def __init__(self, observation_mode: str = "text", num_products: int | None = None):
        assert observation_mode == "text"
        self.server, self.session = _Server(), None
        self.page, self.results, self.item, self.picked = "search", [], None, {}

    def reset(self, session=None):
        self.session = session
        self.server.user_sessions[session] = {"goal": self.server.goals[session]}
        self.page, self.results, self.item, self.picked = "search", [], None, {}
        return self.observation, None

    @property
    def observation(self) -> str:
        instruction = self.server.user_sessions[self.session]["goal"]["instruction_text"]
        if self.page == "search":
            return f"WebShop [SEP] Instruction: [SEP] {instruction} [SEP] Search"
        if self.page == "results":
            rows = [f"{a.upper()} [SEP] {t} [SEP] ${p:.2f}" for a, t, p, _ in self.results]
            return f"Back to Search [SEP] Page 1 (Total results: {len(rows)}) [SEP] " + " [SEP] ".join(rows)
        asin, title, price, options = self.item
        shown = " [SEP] ".join(f"{kind} [SEP] " + " [SEP] ".join(values) for kind, values in options.items())
        return f"Back to Search [SEP] < Prev [SEP] {shown} [SEP] {title} [SEP] Price: ${price:.2f} [SEP] Buy Now"

    def get_available_actions(self) -> dict:
        if self.page == "search":
            return {"has_search_bar": True, "clickables": []}
        if self.page == "results":
            return {"has_search_bar": False, "clickables": ["back to search", *(a for a, *_ in self.results)]}
        options = [v for values in self.item[3].values() for v in values]
        return {"has_search_bar": False, "clickables": ["back to search", "< prev", *options, "buy now"]}

    def step(self, action: str):
        kind, _, rest = action.partition("[")
        arg = rest[:-1].strip().lower()
        if kind == "search" and self.page == "search":
            words = set(arg.split())
            scored = sorted(PRODUCTS, key=lambda p: -len(words & set(p[1].split())))
            self.results, self.page = scored[:4], "results"
        elif arg == "back to search":
            self.page = "search"
        elif arg == "< prev" and self.page == "item":
            self.page = "results"
        elif self.page == "results" and arg in {a for a, *_ in self.results}:
            self.item, self.page, self.picked = next(p for p in PRODUCTS if p[0] == arg), "item", {}
        elif self.page == "item" and arg == "buy now":
            return "Thank you for shopping with us!", self._score(), True, None
        elif self.page == "item":
            for kind_name, values in self.item[3].items():
                if arg in values:
                    self.picked[kind_name] = arg
        return self.observation, 0.0, False, None

    def _score(self) -> float:
        goal = self.server.user_sessions[self.session]["goal"]
        if self.item[0] != goal["asin"]:
            return 0.1
        wanted = goal["goal_options"]
        return round((1 + sum(self.picked.get(k) == v for k, v in wanted.items())) / (1 + len(wanted)), 3)
