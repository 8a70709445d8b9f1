"""A generated section of a markdown document: the lines between a begin marker (a line starting with
`begin`) and an end marker (a line equal to `end`), markers included. Shared by the scripts that keep
docs/planner.md's validation table and docs/api.md's route list in step with the code. Standard library only.
"""

import difflib
import pathlib
import sys


def split_doc(text, begin, end):
    """(before, section, after) as lists of lines; the section includes both markers."""
    lines = text.split("\n")
    begins = [i for i, l in enumerate(lines) if l.startswith(begin)]
    ends = [i for i, l in enumerate(lines) if l.strip() == end]
    if len(begins) != 1 or len(ends) != 1 or ends[0] < begins[0]:
        raise SystemExit(f"expected one '{begin} ... -->' line followed by one '{end}' line")
    return lines[: begins[0]], lines[begins[0] : ends[0] + 1], lines[ends[0] + 1 :]


def write_or_check(doc, begin, end, generated, write, what, source, regenerate):
    """Writes `generated` (lines, markers included) into `doc` (write), or compares: 0 when the committed
    section is the same, else prints a diff and how to `regenerate`, and returns 1. `what` names the
    section's entries ("routes", "rows"); `source` what it is generated from."""
    doc = pathlib.Path(doc)
    before, section, after = split_doc(doc.read_text(encoding="utf-8"), begin, end)
    if write:
        doc.write_text("\n".join(before + generated + after), encoding="utf-8")
        return 0
    if section == generated:
        print(f"{doc}: up to date ({len(generated) - 6} {what})")
        return 0
    sys.stdout.writelines(
        difflib.unified_diff([l + "\n" for l in section], [l + "\n" for l in generated],
                             fromfile=f"{doc} (committed)", tofile=f"generated from {source}"))
    print(f"\n{doc}: differs from {source}; regenerate it with {regenerate}")
    return 1
