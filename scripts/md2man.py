#!/usr/bin/python3
"""Turn a man page written in a small subset of Markdown into roff
(man(7) macros), as the build does for docs/man/*.md. No dependency
beyond Python's standard library.

usage: md2man.py [--version V] IN.md OUT.N

The subset (docs/man/dpflow.1.md is an example):

  # NAME(N) -- one-line summary      the first line: .TH and the NAME section
  ## HEADING                         .SH HEADING
  ### Subheading                     .SS
  paragraphs separated by blank lines
  `TERM`                             a tagged paragraph (.TP): a line in
  :   description                    backquotes, then ':' lines
      continued, indented
  - item                             a bullet list
  ```  ...  ```                      a literal block (.nf)
  `code`  **bold**  *italic*  [text](link)   inline (link: the text only)
"""
import re
import sys


def inline(text):
    """Escape @text for roff and turn inline Markdown into font changes."""
    out = []
    pos = 0
    pattern = re.compile(r"`([^`]+)`|\*\*([^*]+)\*\*|\*([^*\s][^*]*)\*|"
                         r"\[([^\]]+)\]\(([^)]+)\)")
    for m in pattern.finditer(text):
        out.append(escape(text[pos:m.start()]))
        if m.group(1) is not None:
            out.append("\\fB" + escape(m.group(1)) + "\\fR")
        elif m.group(2) is not None:
            out.append("\\fB" + inline(m.group(2)) + "\\fR")
        elif m.group(3) is not None:
            out.append("\\fI" + inline(m.group(3)) + "\\fR")
        else:
            out.append(inline(m.group(4)))
        pos = m.end()
    out.append(escape(text[pos:]))
    return "".join(out)


def escape(text):
    """Backslashes, hyphens (as minus signs, so options copy and paste)."""
    return text.replace("\\", "\\e").replace("-", "\\-")


def line_out(text):
    """A text line; one starting with a control character is guarded."""
    return "\\&" + text if text[:1] in (".", "'") else text


def convert(lines, version):
    m = re.match(r"#\s+(\S+)\((\w+)\)\s+--\s+(.*)", lines[0]) if lines else None
    if not m:
        raise SystemExit("md2man: the first line must be "
                         "'# NAME(SECTION) -- summary'")
    name, section, summary = m.groups()
    out = ['.TH "%s" "%s" "" "%s" "%s manual"' %
           (name.upper(), section, ("%s %s" % (name, version)).strip(),
            name),
           ".SH NAME", line_out("%s \\- %s" % (escape(name), inline(summary)))]
    para = []  # words of the open paragraph
    i = 1

    def flush():
        if para:
            out.append(".PP")
            out.append(line_out(inline(" ".join(para))))
            para.clear()

    while i < len(lines):
        line = lines[i].rstrip("\n")
        stripped = line.strip()
        nxt = lines[i + 1].rstrip("\n") if i + 1 < len(lines) else ""
        if stripped.startswith("```"):
            flush()
            out += [".PP", ".RS 4", ".nf"]
            i += 1
            while i < len(lines) and not lines[i].strip().startswith("```"):
                out.append(line_out(escape(lines[i].rstrip("\n"))))
                i += 1
            out += [".fi", ".RE"]
        elif line.startswith("### "):
            flush()
            out.append(".SS " + inline(line[4:].strip()))
        elif line.startswith("## "):
            flush()
            out.append('.SH "%s"' % line[3:].strip().upper())
        elif line.startswith("#"):
            raise SystemExit("md2man: line %d: only ##, ### headings "
                             "follow the title" % (i + 1))
        elif not stripped:
            flush()
        elif nxt.startswith(":") and not para:
            out += [".TP", line_out(inline(stripped))]
            desc = [nxt[1:].strip()]
            i += 1
            while (i + 1 < len(lines) and lines[i + 1].startswith(" ") and
                   lines[i + 1].strip()):
                i += 1
                desc.append(lines[i].strip())
            out.append(line_out(inline(" ".join(desc))))
        elif re.match(r"[-*] ", stripped):
            flush()
            item = [stripped[2:].strip()]
            while (i + 1 < len(lines) and lines[i + 1].startswith("  ") and
                   lines[i + 1].strip()):
                i += 1
                item.append(lines[i].strip())
            out += [".IP \\(bu 2", line_out(inline(" ".join(item)))]
        else:
            para.append(stripped)
        i += 1
    flush()
    return "\n".join(out) + "\n"


def main(argv):
    version = ""
    if len(argv) > 2 and argv[1] == "--version":
        version = argv[2]
        argv = argv[:1] + argv[3:]
    if len(argv) != 3:
        sys.stderr.write(__doc__.split("\n\n")[1] + "\n")
        return 2
    with open(argv[1], encoding="utf-8") as f:
        lines = f.readlines()
    text = convert(lines, version)
    with open(argv[2], "w", encoding="utf-8") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
