"""What mutation testing found untested in the answers store (tools/mutate.py,
conceptlens/studies/store.py)."""

from __future__ import annotations

import pytest

from conceptlens.studies import store as S
from conceptlens.studies.design import StudyError
from tests.study_factory import create


def test_an_unknown_store_url_is_refused_naming_its_scheme_not_its_password():
    with pytest.raises(
        StudyError, match=r"must start with postgresql:// or sqlite:/// \(it has 'no scheme'\)"
    ):
        S.open_store("answers.sqlite")
    with pytest.raises(StudyError) as e:
        S.open_store("mysql://admin:hunter2@db.example/answers")
    assert "(it has 'mysql')" in str(e.value) and "hunter2" not in str(e.value)


def test_an_empty_store_lists_no_studies_with_the_columns_of_a_full_one(tmp_path, factory_template):
    empty = S.SqliteStore(tmp_path / "none" / "answers.sqlite").studies()
    full = S.SqliteStore(tmp_path / "answers.sqlite")
    create(full, factory_template)
    listed = full.studies()
    full.close()
    assert empty.empty and len(listed) == 1
    assert list(empty.columns) == list(listed.columns)
