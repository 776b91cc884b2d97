"""Atomic writes leave the old file or the new one, never a torn one or a stray temp file."""

import os

import numpy as np
import pytest

from instir import atomic


def test_a_crash_before_the_rename_keeps_the_old_content_and_no_temp_file(tmp_path, monkeypatch):
    target = tmp_path / "run.trec"
    target.write_text("old")

    def crash(src, dst):
        raise KeyboardInterrupt("simulated crash")

    monkeypatch.setattr(atomic.os, "replace", crash)
    with pytest.raises(KeyboardInterrupt):
        atomic.write_text(target, "new")
    assert target.read_text() == "old"
    assert os.listdir(tmp_path) == ["run.trec"]


def test_arrays_round_trip_through_an_atomic_npy_write(tmp_path):
    array = np.arange(12, dtype=np.float32).reshape(3, 4)
    atomic.save_array(tmp_path / "chunk.npy", array)
    assert np.array_equal(np.load(tmp_path / "chunk.npy"), array)
