"""Data contracts of DESIGN.md: Arrow schemas, checked rows, importers and exporters.

    from squeez_ray.schema import read_examples, write_examples, DataError
    rows = read_examples("../shared/eval/public_cases.jsonl")      # canonical rows, any input format
    write_examples(rows, "out/examples.parquet")                     # explicit Arrow schema
    write_examples(rows, "out/cases.jsonl", format="cases")          # or "squeez" / "hf"

``contracts`` holds the schemas and row checks, ``formats`` the row converters (cases, Squeez
prompt/response), ``files`` the JSONL / Parquet / ``datasets`` readers and writers.
"""

from squeez_ray.schema.contracts import (LABELLED_FIELDS, LABELLED_SCHEMA, OBSERVATION_FIELDS, OBSERVATION_SCHEMA,
                                         DataError, check_example, check_observation)
from squeez_ray.schema.files import read_examples, read_observations, write_examples, write_observations
from squeez_ray.schema.formats import FORMATS, locate_lines, to_cases_row, to_squeez_row
from squeez_ray.schema.importing import ImportSummary, import_examples

__all__ = [
    "DataError", "LABELLED_SCHEMA", "LABELLED_FIELDS", "OBSERVATION_SCHEMA", "OBSERVATION_FIELDS", "FORMATS",
    "check_example", "check_observation", "read_examples", "write_examples", "read_observations",
    "write_observations", "to_cases_row", "to_squeez_row", "locate_lines", "import_examples", "ImportSummary",
]
