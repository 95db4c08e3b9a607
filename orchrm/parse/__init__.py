"""Every input form of an orchestration -> `Orchestration`, or a precise `ParseError`.

Forms read here:
- harmony XML as LLMs really write it (`parse_harmony`): prose around it, code fences,
  the gpt-oss `analysis ... assistantfinal` prefix, missing closing tags, ids padded with
  whitespace, debate roles as a JSON, Python or comma-separated list;
- MAS-Orchestra `mas_code` (`parse_mas_code`): the literal agent definitions are read
  with `ast.literal_eval`; the code is never executed;
- the JSON graph form (`parse_json_graph`) and orchrm's own JSON (`from_dict`);
- whole log records (`parse_record`), dispatched on their fields.

Each parser raises `ParseError` (reason code, message, character offset) on malformed
input and nothing else, in time linear in the input: text over `MAX_ORCHESTRATION_CHARS`
is refused unread and literals nested deeper than `MAX_LITERAL_DEPTH` are refused.
Whether a parsed graph obeys the rules is `validate`'s business.
"""

from orchrm.parse.error import ParseError
from orchrm.parse.harmony import (
    FINAL_MARKER,
    MAX_LITERAL_DEPTH,
    MAX_ORCHESTRATION_CHARS,
    extract_thinking,
    parse_harmony,
    parse_roles,
)
from orchrm.parse.mas_code import parse_mas_code
from orchrm.parse.records import (
    TEXT_FIELDS,
    ParseSummary,
    from_dict,
    parse_diagram_record,
    parse_json_graph,
    parse_record,
    read_records,
    summarize_file,
)

__all__ = [
    "FINAL_MARKER",
    "MAX_LITERAL_DEPTH",
    "MAX_ORCHESTRATION_CHARS",
    "TEXT_FIELDS",
    "ParseError",
    "ParseSummary",
    "extract_thinking",
    "from_dict",
    "parse_diagram_record",
    "parse_harmony",
    "parse_json_graph",
    "parse_mas_code",
    "parse_record",
    "parse_roles",
    "read_records",
    "summarize_file",
]
