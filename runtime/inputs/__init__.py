"""Reading untrusted input files: one containment rule for every path a user file names
(``paths``), one bounded reader for every file read from user input (``reading``), and one
strict JSON decoder with a nesting bound (``json_text``)."""
