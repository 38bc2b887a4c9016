#!/usr/bin/env bash
# Size gates (scripts/test.sh runs this first): no file under src/ over 600 lines, no function over 80.
# A function runs from the first line of its definition (template and return type included) to its
# closing brace; lambdas and local classes count toward the function that holds them. Braces are
# counted with comments, string and character literals and preprocessor lines blanked out. Prints the
# longest files and functions, offenders first, and exits 1 when there is any offender.
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 - "$@" <<'PY'
import pathlib, re, sys

MAX_FILE, MAX_FUNCTION, SHOWN = 600, 80, 8
GENERATED = {"src/data/unicode_tables.cpp"}  # written by make_unicode_tables.py ("do not edit")
CONTAINER = re.compile(r"^(?:\[\[.*?\]\]\s*)*(?:(?:typedef|inline)\s+)*(?:namespace|class|struct|union|enum|extern)\b")

def blank(text):
    """The code with comments, literals and preprocessor lines replaced by spaces, newlines kept."""
    out, i, n = [], 0, len(text)
    def skip_to(end):  # blanks text[i:end], keeping its newlines
        out.append(re.sub(r"[^\n]", " ", text[i:end]))
        return end
    while i < n:
        c = text[i]
        line_start = text.rfind("\n", 0, i) + 1
        if c == "#" and not text[line_start:i].strip():  # a directive, with its continuation lines
            end = i
            while True:
                end = text.find("\n", end)
                if end < 0 or text[end - 1] != "\\": break
                end += 1
            i = skip_to(n if end < 0 else end)
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = skip_to(n if end < 0 else end)
        elif text.startswith("/*", i):
            i = skip_to(text.index("*/", i) + 2)
        elif (m := re.match(r'(?:u8|u|U|L)?R"([^(\s]*)\(', text[i:])) and not re.match(r"\w", text[i - 1:i]):
            i = skip_to(text.index(")" + m.group(1) + '"', i + m.end()) + len(m.group(1)) + 2)
        elif c in "\"'":
            token = re.search(r"[\w.']*$", text[line_start:i]).group()
            if c == "'" and token[:1].isdigit():  # a digit separator: 1'000
                out.append(c); i += 1; continue
            end = i + 1
            while text[end] != c: end += 2 if text[end] == "\\" else 1
            i = skip_to(end + 1)
        else:
            out.append(c); i += 1
    return "".join(out)

def functions(code):
    """(first line, last line, name) of every function defined at namespace or class scope."""
    # stack: "container" (namespace, class, initializer), "head" (a brace inside a function's head: a
    # member's {} or a lambda in its initializer list), "body" (inside a function) or (first line, name)
    found, stack, head_start = [], [], 0
    for i, c in enumerate(code):
        if c in ";{}" and any(s != "container" for s in stack):
            if c == "{": stack.append("body")
            elif c == "}" and isinstance(top := stack.pop(), tuple):
                found.append((top[0], code.count("\n", 0, i) + 1, top[1]))
                head_start = i + 1
            continue
        if c in ";}": head_start = i + 1
        if c == "}": stack.pop()
        if c != "{": continue
        head = re.sub(r"^\s*(?:(?:public|private|protected)\s*:\s*)+", "", code[head_start:i])
        bare = re.sub(r"^\s*template\s*<.*?>\s*(?=[A-Za-z_\[])", "", head, flags=re.S).strip()
        if bare.count("(") > bare.count(")") or re.search(r"\)\s*(?:noexcept\s*)?:(?!:).*[\w>]$", bare, re.S):
            stack.append("head")
        elif "(" in bare and not CONTAINER.match(bare):
            first = i - len(head.lstrip())
            name = re.findall(r"(?:[\w:~]*operator\s*(?:\(\)|[^\s(]+)|[\w:~]+)(?=\s*\()", bare)
            stack.append((code.count("\n", 0, first) + 1, name[0] if name else "?"))
        else:
            stack.append("container")
            head_start = i + 1
    return found

files, funcs = [], []
for path in sorted(pathlib.Path("src").rglob("*")):
    if path.suffix not in (".cpp", ".h") or str(path) in GENERATED: continue
    text = path.read_text()
    files.append((text.count("\n"), str(path)))
    funcs += [(last - first + 1, f"{path}:{first}", name) for first, last, name in functions(blank(text))]

def table(title, rows, limit, columns):
    rows.sort(key=lambda r: -r[0])
    over = [r for r in rows if r[0] > limit]
    print(f"{title}: {len(over)} over {limit} lines (of {len(rows)} measured)")
    print("  " + "  ".join(f"{h:<{w}}" for h, w in columns))
    for r in rows[:max(len(over), SHOWN)]:
        print("  " + "  ".join(f"{str(v):<{w}}" for v, (_, w) in zip(r, columns)) + ("  <- over" if r[0] > limit else ""))
    return len(over)

offenders = table("files under src/", files, MAX_FILE, [("lines", 6), ("file", 44)])
print()
offenders += table("functions", funcs, MAX_FUNCTION, [("lines", 6), ("where", 44), ("function", 36)])
if GENERATED: print(f"\nnot measured (generated): {', '.join(sorted(GENERATED))}")
sys.exit(1 if offenders else 0)
PY
