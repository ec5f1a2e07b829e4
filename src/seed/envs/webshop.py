"""WebShop as the paper runs it, through the remote protocol: a shim around WebShop's own text environment.

WebShop pins its own torch and needs its product data, so it runs in its own install and is served from there:

    # inside a WebShop install (github.com/princeton-nlp/WebShop, its setup and data)
    python -m seed.envs.serve seed.envs.webshop:WebShopEnv --port 8765
    # the trainer (configs/webshop_seed_qwen2.5-3b.yaml)
    seed run webshop_seed_qwen2.5-3b

The shim builds `web_agent_site.envs.WebAgentTextEnv` (observation mode text; `backend` may name another class
with its interface, `module:Class`, as the tests' stand-in does). It gives the paper's setting: the instruction is
the task, the admissible actions are `search[<your query>]` where the page has a search bar and `click[x]` for each
clickable, an action that is neither is a no-op flagged invalid, and an episode is won when the purchase scores
1.0 (the env's reward is WebShop's score in [0, 1]). Splits follow WebShop's goal order: goals 0–499 (its test
set) are `valid_unseen`, 500–1499 `valid_seen`, the rest `train`. The expert reads the session's goal (product,
options, query): it searches the query, opens the product, picks the options and buys.
"""

from __future__ import annotations

import importlib

from seed.envs.base import Obs, register

SPLIT_GOALS = {"valid_unseen": (0, 500), "valid_seen": (500, 1500), "train": (1500, None)}
SEARCH_TEMPLATE = "search[<your query>]"
BUY = "buy now"


def shop_class(backend: str):
    if backend == "web_agent_site":
        try:
            from web_agent_site.envs import WebAgentTextEnv
        except ImportError as exc:
            raise ImportError("env 'webshop' runs inside a WebShop install (web_agent_site): see its module") from exc
        return WebAgentTextEnv
    module, _, name = backend.partition(":")
    return getattr(importlib.import_module(module), name)


@register("webshop", "WebShop's text environment (run inside a WebShop install; served over the remote protocol)")
class WebShopEnv:
    name = "webshop"
    intro = "You are an expert autonomous agent operating in the WebShop e-commerce platform."

    def __init__(self, split: str = "train", backend: str = "web_agent_site", num_products: int | None = None):
        kwargs = {"observation_mode": "text", **({"num_products": num_products} if num_products else {})}
        self.shop = shop_class(backend)(**kwargs)
        first, last = SPLIT_GOALS[split]
        total = len(self.shop.server.goals)
        self.goals = list(range(min(first, total), min(last if last is not None else total, total)))
        if not self.goals:
            raise ValueError(f"WebShop has {total} goals: none in split {split!r} ({first}–{last})")
        self.session, self.chosen = None, []

    def _available(self) -> dict:
        return self.shop.get_available_actions()

    def admissible(self) -> list[str]:
        available = self._available()
        search = [SEARCH_TEMPLATE] if available.get("has_search_bar") else []
        return search + [f"click[{c}]" for c in available.get("clickables", [])]

    def _obs(self, text: str, won: bool = False) -> Obs:
        instruction = self.goal()["instruction_text"]
        page = " [SEP] ".join(p for p in text.split(" [SEP] ") if p.strip() and p.strip() != instruction)
        return Obs(page, instruction, self.admissible(), won, "webshop")

    def goal(self) -> dict:
        return self.shop.server.user_sessions[self.shop.session]["goal"]

    def reset(self, seed: int) -> Obs:
        self.session, self.chosen = self.goals[seed % len(self.goals)], []
        text, _ = self.shop.reset(session=self.session)
        return self._obs(text)

    def _accepts(self, action: str) -> bool:
        kind, _, rest = action.partition("[")
        if not rest.endswith("]") or not rest[:-1].strip():
            return False
        available = self._available()
        if kind == "search":
            return bool(available.get("has_search_bar"))
        return kind == "click" and rest[:-1].strip().lower() in {c.lower() for c in available.get("clickables", [])}

    def step(self, action: str) -> tuple[Obs, float, bool, dict]:
        if self.session is None:
            raise RuntimeError("call reset() before step()")
        action = action.strip()
        if not self._accepts(action):
            text = self.shop.observation if isinstance(getattr(self.shop, "observation", None), str) else ""
            return self._obs(text or "Nothing happens."), 0.0, False, {"valid": False}
        text, reward, done, _ = self.shop.step(action.lower() if action.startswith("click[") else action)
        if action.lower().startswith("click[") and action[6:-1].lower() in self._option_values():
            self.chosen.append(action[6:-1].lower())
        won = bool(done) and float(reward) >= 1.0
        return self._obs(text, won), float(reward), bool(done), {"valid": True, "won": won, "score": float(reward)}

    def _option_values(self) -> set[str]:
        options = self.goal().get("goal_options", [])
        values = options.values() if isinstance(options, dict) else options
        return {str(v).lower() for v in values}

    def expert_plan(self) -> list[str]:
        """From the page at hand: search the goal's query, open its product, pick its options, buy."""
        if self.session is None:
            raise RuntimeError("call reset() before expert_plan()")
        goal, available = self.goal(), self._available()
        clickables = {c.lower() for c in available.get("clickables", [])}
        asin = str(goal["asin"]).lower()
        options = [v for v in sorted(self._option_values()) if v not in self.chosen]
        on_item = BUY in clickables
        tail = [f"click[{v}]" for v in options] + [f"click[{BUY}]"]
        if on_item:
            return tail
        if asin in clickables:
            return [f"click[{asin}]", *tail]
        if available.get("has_search_bar"):
            return [f"search[{goal.get('query') or goal['instruction_text']}]", f"click[{asin}]", *tail]
        return ["click[back to search]"] if "back to search" in clickables else []

    def close(self) -> None:
        self.session = None
