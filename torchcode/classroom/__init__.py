"""Grading a whole class: `torchcode grade`.

- ``discover``: the submissions (a folder per student, or a zip of that layout) and the files
  that are not submissions;
- ``gradebook``: the SQLite file in ``--out`` that keeps every result (resume, Ctrl-C);
- ``pool``: N warm grading sessions on this machine; ``ray_pool``: one per Ray actor;
- ``feedback``: grades.csv, grades.json, one feedback file per student, the summary table;
- ``run``: the run itself, tying them together.

No torch here: the grading sessions import it in their own processes.
"""
