"""The one bounded reader: regular files only, never blocks, never reads past its limit."""

from __future__ import annotations

import os
import threading

import pytest

from harness.base.readfile import InputError, read_bounded, read_text_bounded


def test_reads_a_regular_file(tmp_path):
    p = tmp_path / "a.yaml"
    p.write_bytes(b"name: x\n")
    assert read_bounded(p, 100) == b"name: x\n"
    assert read_text_bounded(p, 100) == "name: x\n"


def test_a_file_of_exactly_the_limit_is_read_one_more_byte_is_refused(tmp_path):
    p = tmp_path / "a"
    p.write_bytes(b"x" * 10)
    assert read_bounded(p, 10) == b"x" * 10
    with pytest.raises(InputError, match="over the 9 byte limit"):
        read_bounded(p, 9)


def test_a_fifo_is_refused_at_once_without_a_writer(tmp_path):
    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    done = []

    def read() -> None:
        try:
            read_bounded(fifo, 100, "campaign")
        except InputError as e:
            done.append(e.message)

    t = threading.Thread(target=read, daemon=True)
    t.start()
    t.join(5)
    assert done and "a FIFO, not a regular file" in done[0]


def test_dev_zero_is_refused_not_read_forever():
    with pytest.raises(InputError, match="character device"):
        read_bounded("/dev/zero", 1 << 20)


def test_a_folder_and_a_missing_file_are_refused(tmp_path):
    with pytest.raises(InputError, match="a folder"):
        read_bounded(tmp_path, 100)
    with pytest.raises(InputError, match="cannot read"):
        read_bounded(tmp_path / "nope", 100)


def test_a_symlink_is_refused_even_to_a_regular_file(tmp_path):
    target = tmp_path / "t"
    target.write_text("secret")
    link = tmp_path / "l"
    link.symlink_to(target)
    with pytest.raises(InputError, match="symlink"):
        read_bounded(link, 100)


def test_not_utf8_text_is_refused_with_the_byte_offset(tmp_path):
    p = tmp_path / "a"
    p.write_bytes(b"ok\xff")
    with pytest.raises(InputError, match=r"not UTF-8 text .* at byte 2"):
        read_text_bounded(p, 100)


def test_an_operator_named_symlink_may_be_followed_but_still_must_be_regular(tmp_path):
    target = tmp_path / "t"
    target.write_text("x")
    link = tmp_path / "l"
    link.symlink_to(target)
    assert read_bounded(link, 100, follow_symlinks=True) == b"x"
    fifo_link = tmp_path / "fl"
    os.mkfifo(tmp_path / "fifo")
    fifo_link.symlink_to(tmp_path / "fifo")
    with pytest.raises(InputError, match="FIFO"):
        read_bounded(fifo_link, 100, follow_symlinks=True)


def test_a_symlinked_campaign_file_is_read_but_a_symlinked_fifo_is_refused(tmp_path):
    from harness.config.yamlsafe import YamlFaults, load

    real = tmp_path / "real.yaml"
    real.write_text("name: x\n")
    link = tmp_path / "campaign.yaml"
    link.symlink_to(real)
    assert load(link).data == {"name": "x"}
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "f.yaml").symlink_to(tmp_path / "fifo")
    with pytest.raises(YamlFaults, match="FIFO"):
        load(tmp_path / "f.yaml")
