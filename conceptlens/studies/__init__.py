"""Human studies: people answer 2AFC coherence and describability tasks (laina2020) and
8-rank-2 similarity trials (roads2021) in the browser.

- `design`: a study's tasks and who answers which, fixed from a seed when it is created;
- `store`: the answers store (SQLite in WAL mode in a writable folder outside the workspace,
  or PostgreSQL when `CONCEPTLENS_ANSWERS_URL` says so): one transaction per answer,
  idempotent by (study, participant, task);
- `shown`: what a participant's page may show of a task (never which side is correct);
- `results`: Clopper-Pearson per cluster next to the proxy annotator's, Krippendorff's alpha,
  catch-task failure rates, and the export into workspace tables;
- `cli`: `conceptlens study create|list|export|close`.

Nothing here imports Streamlit: the pages (`pages/studies.py`, `participant/study.py`) only
render what `conceptlens.views.studies` returns.
"""
