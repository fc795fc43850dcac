"""Human studies: people answer 2AFC coherence and describability tasks (laina2020) and
8-rank-2 similarity trials (roads2021) in the browser.

- `design`: a study's tasks and who answers which, fixed from a seed when it is created;
- `store`: the answers store (SQLite in WAL mode in a writable folder outside the workspace,
  or PostgreSQL when `CONCEPTLENS_ANSWERS_URL` says so): one transaction per answer,
  idempotent by (study, participant, task);
- `shown`: what a participant's page may show of a task (never which side is correct);
- `results`: Clopper-Pearson per cluster next to the proxy annotator's, Krippendorff's alpha,
  catch-task failure rates, and the export into workspace tables;
- `service`: the owner and participant roles: every write and every private read, checked on
  the server (the owner secret, read-only deployments, one place per browser session, the
  study's own workspace);
- `plan`: people per task for a Clopper-Pearson interval of a chosen width, from simulated
  observers, and those observers' answers;
- `cli`: `conceptlens study create|list|export|close`.

Nothing here imports Streamlit: the pages (`pages/studies.py`, `participant/study.py`) read the
workspace through `conceptlens.views.studies` and act through `service`.
"""
