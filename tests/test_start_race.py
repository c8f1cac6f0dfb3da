"""Two writers remembering for a user with no active conversation at the same moment: both turns are stored,
in one conversation (the loser of the race to start it talks in the winner's), on both stores."""

from __future__ import annotations

import threading

import narrative


def test_racing_first_messages_share_one_conversation(db: str) -> None:
    with narrative.Memory(db, user="racer", embedder="none", env={}) as setup:
        setup.list_storylines()  # the user exists before the race
    writers = [narrative.Memory(db, user="racer", embedder="none", env={}) for _ in range(4)]
    barrier = threading.Barrier(len(writers))
    errors: list[BaseException] = []

    def write(index: int) -> None:
        try:
            barrier.wait()
            writers[index].add_message(f"turn from writer {index}", speaker="Ana")
        except BaseException as error:  # pragma: no cover - the assertion below reports it
            errors.append(error)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(len(writers))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    try:
        assert errors == []
        conversations = writers[0].list_conversations()
        assert len(conversations) == 1 and conversations[0].status.value == "active"
        assert sorted(m.content for m in writers[0].messages()) == [f"turn from writer {i}" for i in range(4)]
    finally:
        for writer in writers:
            writer.close()
