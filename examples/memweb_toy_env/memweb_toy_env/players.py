"""The offline players: a scripted member (the customer) and a scripted librarian (the agent)."""
import random
import re

from evaluation.environments import STOP

_TITLE_RE = re.compile(r'"([^"]+)"')
_EMAIL_RE = re.compile(r"[\w.+-]+@[\w.-]+\.\w+")


def ask(intent: dict) -> str:
    title = intent["slots"]["title"]
    return f'Could you put a hold on "{title}" for me?' if intent["kind"] == "place_hold" else f'Is "{title}" on the shelf?'


def copies(count: int) -> str:
    return "no copy" if not count else "1 copy" if count == 1 else f"{count} copies"


class ScriptedMember:
    label = "scripted-member"
    tokens_in = tokens_out = 0

    def __init__(self, *, task: dict, seed: int):
        self.rng = random.Random(f"{seed}:{task['id']}:member")
        self.agenda = [dict(intent) for intent in task["intents"]]
        self.email, self.patience = task["known"]["email"], task["persona"]["patience"]

    def opening(self) -> str:
        return f"{self.rng.choice(('Hello.', 'Hi there!'))} {ask(self.agenda[0])}"

    def respond(self, agent_text: str) -> str:
        said = agent_text.lower()
        if "email" in said:
            return f"My email is {self.email}."
        if self._handled(said):
            self.agenda.pop(0)
            return ask(self.agenda[0]) if self.agenda else f"Thank you! {STOP}"
        self.patience -= 1
        return f"Never mind. {STOP}" if self.patience <= 0 else f"Sorry, once more: {ask(self.agenda[0])}"

    def _handled(self, said: str) -> bool:
        wanted = self.agenda[0]
        if wanted["kind"] == "place_hold":
            return "hold" in said and "placed" in said
        return "on the shelf" in said and wanted["slots"]["title"].lower() in said


class ScriptedLibrarian:
    """Serves one request at a time. With a `wrong_arguments` rate it may put a hold on the wrong
    book, unless a memory it is given says to check the book id."""
    label = "scripted-librarian"
    tokens_in = tokens_out = 0

    def __init__(self, *, seed: int, key: str, error_rates: dict[str, float] | None = None):
        rng = random.Random(f"{seed}:{key}:librarian")
        self.wrong_book = rng.random() < (error_rates or {}).get("wrong_arguments", 0.0)
        self.committed: set[str] = set()
        self.member_id: str | None = None
        self.wants: tuple[str, str] | None = None  # (intent kind, title)

    def respond(self, *, text: str, memory: str, env, recall=None) -> str:
        if "check the book id" in (memory or "").lower():
            self.wrong_book = False
        email, title = _EMAIL_RE.search(text), _TITLE_RE.search(text)
        if email:
            found = env.use("find_member", email=email.group(0))
            self.member_id = found.data["id"] if found.ok else None
        if title:
            self.wants = ("place_hold" if "hold" in text.lower() else "availability", title.group(1))
        if self.wants is None:
            return "How can I help you?"
        return self._serve(env, *self.wants)

    def _serve(self, env, kind: str, title: str) -> str:
        books = env.use("search_books", query=title).data["books"]
        if not books:
            self.wants = None
            return f'I cannot find "{title}" in the catalogue.'
        if kind == "availability":
            self.wants = None
            return f'"{title}" has {copies(books[0]["copies_available"])} on the shelf.'
        if self.member_id is None:
            return "Could you tell me your email address, please?"
        book_id = books[0]["id"]
        if self.wrong_book:
            book_id = "B4" if book_id != "B4" else "B1"
            self.committed.add("wrong_arguments")
        hold = env.use("place_hold", member_id=self.member_id, book_id=book_id)
        self.wants = None
        return f'Your hold on "{title}" is placed: hold {hold.data["id"]}.' if hold.ok else \
            f"I could not place the hold ({hold.content})."
