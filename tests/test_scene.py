"""The <scene_memory> formatter: windows, hints, separators, annotations, budget (golden strings)."""

from __future__ import annotations

import json

import pytest

from narrative.errors import ValidationError
from narrative.providers.tokens import ApproxTokenCounter
from narrative.read.scene import (
    Bucket,
    Relationship,
    SceneItem,
    SceneSettings,
    build_scene,
    format_scene,
)

I = SceneItem  # noqa: E741  (short name keeps the item tables readable)


def block(chat_length: int, *body: str) -> str:
    count = f"{chat_length} message{'' if chat_length == 1 else 's'}"
    return "\n".join(["<scene_memory>", f"(Current chat has {count})", *body, "</scene_memory>"])


# The seed's illustration, verbatim.
SEED_EXAMPLE = """<scene_memory>
(Current chat has #5000 messages)

## The Story So Far
[★★] You bought a sword.
[★★★] The village elder warned of goblin raids.
    ⤷ Shortly after

...Later...

[★★] You met Marcus at the tavern.

...Much later...

[★★★★] The great battle began.
    💔 Emotional: fear, determination

## Leading Up To This Moment
[★★★★] The goblin stole the amulet.
[★★] You tracked the goblin into the forest.
    ⤷ IMMEDIATELY AFTER

...

[★★★] Marcus betrayed the group.
    💔 Emotional: guilt

## Current Scene
Emotional state: anxious
Relationships: Goblin (enemy, high tension)

[★★★★★] The goblin camp was burned.
[★★] The goblin is cornered.
    ⤷ IMMEDIATELY AFTER
</scene_memory>"""

SEED_ITEMS = [
    I(100, "You bought a sword.", 2),
    I(110, "The village elder warned of goblin raids.", 3),
    I(300, "You met Marcus at the tavern.", 2),
    I(1000, "The great battle began.", 4, ("fear", "determination")),
    I(4600, "The goblin stole the amulet.", 4),
    I(4602, "You tracked the goblin into the forest.", 2),
    I(4700, "Marcus betrayed the group.", 4, ("guilt",)),
    I(4980, "The goblin camp was burned.", 5),
    I(4982, "The goblin is cornered.", 2),
]


def test_seed_example_reproduced() -> None:
    # The illustration breaks two of the seed's own rules; the rules win:
    # separators only in The Story So Far (no "..." in Leading Up), and annotations only
    # from importance 4 (so the betrayal is a ★★★★ memory here).  And the chat's length is a count, not a
    # message number: "5000 messages", not "#5000 messages" (docs/decisions.md).
    expected = SEED_EXAMPLE.replace(
        "    ⤷ IMMEDIATELY AFTER\n\n...\n\n[★★★] Marcus", "    ⤷ IMMEDIATELY AFTER\n[★★★★] Marcus"
    ).replace("(Current chat has #5000 messages)", "(Current chat has 5000 messages)")
    assert expected.count("\n") == SEED_EXAMPLE.count("\n") - 3
    out = format_scene(
        reversed(SEED_ITEMS),  # any order in, position order out
        5000,
        emotional_state="anxious",
        relationships=[Relationship("Goblin", ("enemy", "high tension"))],
    )
    assert out == expected


def test_chat_of_10_has_only_the_current_scene() -> None:
    items = [
        I(2, "You woke in a cold cell.", 3),
        I(8, "A guard slid bread under the door.", 2),
        I(10, "The lock clicked open.", 4, ("hope",)),
    ]
    assert format_scene(items, 10) == block(
        10,
        "",
        "## Current Scene",
        "[★★★] You woke in a cold cell.",
        "[★★] A guard slid bread under the door.",
        "    ⤷ Shortly after",
        "[★★★★] The lock clicked open.",
        "    ⤷ IMMEDIATELY AFTER",
        "    💔 Emotional: hope",
    )


def test_chat_of_100_has_no_story_so_far() -> None:
    items = [
        I(10, "Mira joined the caravan.", 3),
        I(45, "The caravan reached the salt flats.", 2),
        I(60, "A sandstorm split the group.", 4, ("fear",)),
        I(98, "Mira found the lost wagon.", 5, ("relief", "joy")),
    ]
    assert format_scene(items, 100) == block(
        100,
        "",
        "## Leading Up To This Moment",
        "[★★★] Mira joined the caravan.",
        "[★★] The caravan reached the salt flats.",  # 35 apart: no separator outside Story So Far
        "",
        "## Current Scene",
        "[★★★★] A sandstorm split the group.",
        "    💔 Emotional: fear",
        "[★★★★★] Mira found the lost wagon.",
        "    💔 Emotional: relief, joy",
    )


def test_chat_of_1000_has_three_buckets() -> None:
    items = [
        I(20, "The ship left port.", 2),
        I(30, "A storm hit on the second night.", 3),
        I(200, "The crew elected a new captain.", 3),
        I(480, "Land was sighted to the west.", 4),
        I(600, "The crew built a camp on the beach.", 2),
        I(940, "Strange drums sounded from the jungle.", 3),
        I(960, "Scouts returned wounded.", 4, ("dread",)),
        I(999, "The drums stopped.", 5),
    ]
    assert format_scene(items, 1000) == block(
        1000,
        "",
        "## The Story So Far",
        "[★★] The ship left port.",
        "[★★★] A storm hit on the second night.",
        "    ⤷ Shortly after",
        "",
        "...Later...",
        "",
        "[★★★] The crew elected a new captain.",
        "",
        "...Later...",
        "",
        "[★★★★] Land was sighted to the west.",
        "",
        "## Leading Up To This Moment",
        "[★★] The crew built a camp on the beach.",
        "[★★★] Strange drums sounded from the jungle.",
        "",
        "## Current Scene",
        "[★★★★] Scouts returned wounded.",
        "    💔 Emotional: dread",
        "[★★★★★] The drums stopped.",
    )


def test_chat_of_5000_keeps_the_current_scene_to_the_last_50_messages() -> None:
    items = [
        I(1, "The kingdom was founded.", 1),
        I(3000, "The old king died.", 4, ("grief",)),
        I(4420, "The heir vanished.", 5),
        I(4450, "Rumours spread in the capital.", 2),
        I(4700, "A letter arrived from the heir.", 4),
        I(4703, "You burned the letter.", 3),
        I(4940, "Riders were seen on the north road.", 3),
        I(4990, "Soldiers knocked at the door.", 5, ("panic",)),
    ]
    assert format_scene(items, 5000) == block(
        5000,
        "",
        "## The Story So Far",
        "[★] The kingdom was founded.",
        "",
        "...Much later...",
        "",
        "[★★★★] The old king died.",
        "    💔 Emotional: grief",
        "",
        "...Much later...",
        "",
        "[★★★★★] The heir vanished.",
        "",
        "...",
        "",
        "[★★] Rumours spread in the capital.",
        "",
        "## Leading Up To This Moment",
        "[★★★★] A letter arrived from the heir.",
        "[★★★] You burned the letter.",
        "    ⤷ IMMEDIATELY AFTER",
        "[★★★] Riders were seen on the north road.",
        "",
        "## Current Scene",
        "[★★★★★] Soldiers knocked at the door.",
        "    💔 Emotional: panic",
    )


@pytest.mark.parametrize(
    ("chat_length", "position", "bucket"),
    [
        (50, 1, Bucket.CURRENT_SCENE),  # a chat of 50: everything is the current scene
        (51, 1, Bucket.LEADING_UP),  # the 51st most recent message
        (1000, 951, Bucket.CURRENT_SCENE),  # the 50th most recent
        (1000, 950, Bucket.LEADING_UP),
        (500, 1, Bucket.LEADING_UP),  # a chat of 500: no Story So Far yet
        (501, 1, Bucket.STORY_SO_FAR),
        (1000, 501, Bucket.LEADING_UP),  # the 500th most recent
        (1000, 500, Bucket.STORY_SO_FAR),
        (1000, 1200, Bucket.CURRENT_SCENE),  # a stale chat length: newest still counts as now
    ],
)
def test_window_boundaries(chat_length: int, position: int, bucket: Bucket) -> None:
    scene = build_scene([I(position, "Something happened.", 2)], chat_length)
    assert [b.name for b in scene.buckets] == [bucket]


@pytest.mark.parametrize(
    ("gap", "hint"),
    [
        (0, ["    ⤷ IMMEDIATELY AFTER"]),
        (4, ["    ⤷ IMMEDIATELY AFTER"]),
        (5, ["    ⤷ Shortly after"]),
        (14, ["    ⤷ Shortly after"]),
        (15, []),
    ],
)
def test_causality_hint_thresholds(gap: int, hint: list[str]) -> None:
    items = [I(960, "The bridge cracked.", 3), I(960 + gap, "The cart fell into the river.", 3)]
    assert format_scene(items, 1000) == block(
        1000, "", "## Current Scene", "[★★★] The bridge cracked.", "[★★★] The cart fell into the river.", *hint
    )


@pytest.mark.parametrize(
    ("gap", "between"),
    [
        (14, ["[★★] The second.", "    ⤷ Shortly after"]),
        (15, ["", "...", "", "[★★] The second."]),
        (99, ["", "...", "", "[★★] The second."]),
        (100, ["", "...Later...", "", "[★★] The second."]),
        (499, ["", "...Later...", "", "[★★] The second."]),
        (500, ["", "...Much later...", "", "[★★] The second."]),
    ],
)
def test_separator_thresholds_in_the_story_so_far(gap: int, between: list[str]) -> None:
    items = [I(100, "The first.", 2), I(100 + gap, "The second.", 2)]
    assert format_scene(items, 5000) == block(5000, "", "## The Story So Far", "[★★] The first.", *between)


def test_no_separators_outside_the_story_so_far() -> None:
    items = [I(510, "Far back in the arc.", 2), I(940, "Much later in the arc.", 2)]
    assert format_scene(items, 1000) == block(
        1000, "", "## Leading Up To This Moment", "[★★] Far back in the arc.", "[★★] Much later in the arc."
    )


@pytest.mark.parametrize(
    ("importance", "emotions", "annotation"),
    [
        (3, ("anger",), []),
        (4, ("anger",), ["    💔 Emotional: anger"]),
        (5, ("anger", "shame"), ["    💔 Emotional: anger, shame"]),
        (5, (), []),
        (5, ("", "  "), []),
    ],
)
def test_emotional_annotation(importance: int, emotions: tuple[str, ...], annotation: list[str]) -> None:
    out = format_scene([I(7, "You shouted at Mira.", importance, emotions)], 10)
    assert out == block(10, "", "## Current Scene", f"[{'★' * importance}] You shouted at Mira.", *annotation)


def test_no_message_numbers_in_the_output() -> None:
    positions = [1234, 2345, 3456, 4567, 4987, 4991]
    items = [I(p, f"Event {chr(65 + i)} took place.", 3) for i, p in enumerate(positions)]
    out = format_scene(items, 5000)
    assert not any(str(p) in out for p in positions)
    assert out.replace("\n## ", "\n").count("#") == 0  # bucket headers aside, no number sign: the length is a count
    assert [e["position"] for b in build_scene(items, 5000).to_dict()["buckets"] for e in b["entries"]] == positions


def test_current_scene_header_with_several_relationships() -> None:
    out = format_scene(
        [I(9, "The duel began.", 4)],
        10,
        emotional_state="calm but wary",
        relationships=[("Goblin", "enemy", "high tension"), Relationship("Marcus"), ("Mira", "ally")],
    )
    assert out == block(
        10,
        "",
        "## Current Scene",
        "Emotional state: calm but wary",
        "Relationships: Goblin (enemy, high tension); Marcus; Mira (ally)",
        "",
        "[★★★★] The duel began.",
    )


def test_state_without_current_memories_and_empty_scene() -> None:
    out = format_scene([I(10, "An old memory.", 2)], 1000, emotional_state="tired")
    assert out == block(
        1000, "", "## The Story So Far", "[★★] An old memory.", "", "## Current Scene", "Emotional state: tired"
    )
    assert format_scene([], 0) == block(0)


# --- token budget -------------------------------------------------------------

TRIM_ITEMS = [
    I(100, "The tower was built.", 2),
    I(150, "The mage moved in.", 3),
    I(160, "The mage vanished.", 4, ("unease",)),
    I(1600, "Lights returned to the tower.", 3),
    I(1603, "You climbed the stairs.", 2),
    I(1990, "The door opened by itself.", 5, ("awe",)),
]
CURRENT = ("", "## Current Scene", "[★★★★★] The door opened by itself.", "    💔 Emotional: awe")
NO_MINIMUM = SceneSettings(MIN_BUDGET=1)  # lets a tiny scene show the truncation order exactly


def test_truncation_drops_the_oldest_story_first_and_recomputes_hints() -> None:
    expected = block(
        2000,
        "",
        "## The Story So Far",
        "[★★★★] The mage vanished.",  # lost its "Shortly after": its predecessor is gone
        "    💔 Emotional: unease",
        "",
        "## Leading Up To This Moment",
        "[★★★] Lights returned to the tower.",
        "[★★] You climbed the stairs.",
        "    ⤷ IMMEDIATELY AFTER",
        *CURRENT,
    )
    budget = ApproxTokenCounter().count(expected)
    scene = build_scene(TRIM_ITEMS, 2000, budget=budget, settings=NO_MINIMUM)
    assert (scene.render(), scene.dropped, scene.tokens) == (expected, 2, budget)


def test_truncation_empties_the_story_before_leading_up_loses_anything() -> None:
    expected = block(2000, "", "## Leading Up To This Moment", "[★★] You climbed the stairs.", *CURRENT)
    budget = ApproxTokenCounter().count(expected)
    scene = build_scene(TRIM_ITEMS, 2000, budget=budget, settings=NO_MINIMUM)
    assert (scene.render(), scene.dropped) == (expected, 4)


def test_current_scene_is_kept_whole_even_over_budget() -> None:
    scene = build_scene(TRIM_ITEMS, 2000, budget=1, settings=NO_MINIMUM)
    assert scene.render() == block(2000, *CURRENT)
    assert (scene.dropped, scene.budget) == (5, 1) and scene.tokens > 1


def long_chat_items() -> list[SceneItem]:
    story = [
        I(10 + 30 * i, f"In the old days the realm saw trouble of kind {chr(65 + i)} at the border.", 3)
        for i in range(40)
    ]
    leading = [
        I(4510 + 10 * i, f"On the road the party argued about plan {chr(65 + i)} for the pass.", 2) for i in range(40)
    ]
    current = [I(4960 + 5 * i, f"In the cave the torch flickered, sign {chr(65 + i)}.", 4) for i in range(5)]
    return story + leading + current


def test_budget_on_a_long_chat_keeps_the_newest_and_fits() -> None:
    items = long_chat_items()
    full = build_scene(items, 5000)
    assert full.tokens > 1900
    for budget in (1000, 1300, 1800):
        scene = build_scene(items, 5000, budget=budget)
        kept = [e.item for b in scene.buckets for e in b.entries]
        assert scene.tokens <= budget
        assert kept == items[scene.dropped :]  # exactly the oldest were dropped, Story So Far first
        assert items[-5:] == kept[-5:]
        # and no more than needed: putting back the last dropped memory overflows
        assert build_scene(items[scene.dropped - 1 :], 5000).tokens > budget
    by_name = {b.name: len(b.entries) for b in build_scene(items, 5000, budget=1000).buckets}
    assert Bucket.STORY_SO_FAR not in by_name and 0 < by_name[Bucket.LEADING_UP] < 40
    by_name = {b.name: len(b.entries) for b in build_scene(items, 5000, budget=1800).buckets}
    assert 0 < by_name[Bucket.STORY_SO_FAR] < 40 and by_name[Bucket.LEADING_UP] == 40


def test_budget_below_1000_is_raised_to_1000() -> None:
    items = long_chat_items()
    low, floor = build_scene(items, 5000, budget=10), build_scene(items, 5000, budget=1000)
    assert low.budget == 1000 and low.render() == floor.render() and 900 < low.tokens <= 1000
    small = build_scene(SEED_ITEMS, 5000, budget=10)  # ~200 tokens: nothing is dropped
    assert small.dropped == 0 and small.render() == format_scene(SEED_ITEMS, 5000)


def test_scene_to_dict_is_json_ready() -> None:
    data = build_scene(SEED_ITEMS, 5000, budget=1200, relationships=[("Goblin", "enemy")]).to_dict()
    assert json.loads(json.dumps(data)) == data
    assert [b["name"] for b in data["buckets"]] == ["story_so_far", "leading_up", "current_scene"]
    second = data["buckets"][0]["entries"][1]
    assert second == {
        "position": 110,
        "text": "The village elder warned of goblin raids.",
        "importance": 3,
        "emotions": [],
        "separator": None,
        "hint": "Shortly after",
        "emotions_shown": [],
    }
    assert data["buckets"][0]["entries"][2]["separator"] == "...Later..."
    assert (data["budget"], data["dropped"], data["counter"]) == (1200, 0, "approx-bpe:1")
    assert data["relationships"] == [{"name": "Goblin", "details": ["enemy"]}]


@pytest.mark.parametrize(
    ("items", "chat_length", "field"),
    [
        ([I(1, "Too faint.", 0)], 10, "importance"),
        ([I(1, "Too loud.", 6)], 10, "importance"),
        ([I(1, "   ", 3)], 10, "text"),
        ([], -1, "chat_length"),
    ],
)
def test_bad_input_is_a_validation_error(items: list[SceneItem], chat_length: int, field: str) -> None:
    with pytest.raises(ValidationError) as caught:
        build_scene(items, chat_length)
    assert caught.value.field == field


def test_settings_can_be_overridden() -> None:
    settings = SceneSettings(CURRENT_SCENE_SIZE=10, LEADING_UP_SIZE=20)
    scene = build_scene([I(1, "Old.", 2), I(85, "Middle.", 2), I(95, "New.", 2)], 100, settings=settings)
    assert [b.name for b in scene.buckets] == [Bucket.STORY_SO_FAR, Bucket.LEADING_UP, Bucket.CURRENT_SCENE]
    with pytest.raises(ValidationError):
        SceneSettings(CURRENT_SCENE_SIZE=600)
