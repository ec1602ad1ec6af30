/**
 * What a dsh kernel does with a cell — chat, Python or SQL — read exactly as the kernel reads it
 * (`dsh_kernel/kernel/cells.py`, `classify`), so the editor never shows a cell as one thing while
 * the kernel runs it as another. Pure functions, no Lab imports.
 *
 * The two readings are held together by one table of cases, `tests/data/cell_kinds.json`, that the
 * kernel's unit tests run through `classify` and the extension's tests run through
 * {@link cellKind} (with node, and in a real JupyterLab through the editor's mode). A change to
 * the routing rules changes both files and the table.
 *
 * Python's `str.strip()`, `str.splitlines()` and its regular expressions' `\s` differ from
 * JavaScript's `trim()`, `split(/\r?\n/)` and `\s` on a few characters (U+001C–U+001F and U+0085
 * are space to Python, U+FEFF to JavaScript), so this module spells out Python's sets.
 */

/** What a cell runs as. */
export type CellKind = 'chat' | 'python' | 'sql';

/** What a plain cell is: `chat` on the `dsh` kernelspec, `python` on `dsh-python`. */
export type DefaultCell = 'chat' | 'python';

/** The kernelspec names of the dsh kernels, and what a plain cell is on each. */
export const DEFAULT_CELL: ReadonlyMap<string, DefaultCell> = new Map<string, DefaultCell>([
  ['dsh', 'chat'],
  ['dsh-python', 'python']
]);

/** The characters Python's `str.isspace()` (and so `str.strip()` and `re`'s `\s`) calls space. */
const PY_SPACE = new Set<string>(
  [
    0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x1c, 0x1d, 0x1e, 0x1f, 0x20, 0x85, 0xa0, 0x1680, 0x2000, 0x2001,
    0x2002, 0x2003, 0x2004, 0x2005, 0x2006, 0x2007, 0x2008, 0x2009, 0x200a, 0x2028, 0x2029, 0x202f,
    0x205f, 0x3000
  ].map(code => String.fromCharCode(code))
);

/** The line boundaries of Python's `str.splitlines()` (`\r\n` is one boundary). */
const PY_LINE_BREAK = new Set<string>(
  [0x0a, 0x0b, 0x0c, 0x0d, 0x1c, 0x1d, 0x1e, 0x85, 0x2028, 0x2029].map(code =>
    String.fromCharCode(code)
  )
);

function isSpace(ch: string): boolean {
  return PY_SPACE.has(ch);
}

/** Python's `s.strip()`. */
function pyStrip(s: string): string {
  let start = 0;
  let end = s.length;
  while (start < end && isSpace(s[start])) {
    start++;
  }
  while (end > start && isSpace(s[end - 1])) {
    end--;
  }
  return s.slice(start, end);
}

/** Python's `s.splitlines()`: no empty last line for a trailing break. */
function pySplitLines(s: string): string[] {
  const lines: string[] = [];
  let start = 0;
  for (let i = 0; i < s.length; i++) {
    if (PY_LINE_BREAK.has(s[i])) {
      lines.push(s.slice(start, i));
      if (s[i] === '\r' && s[i + 1] === '\n') {
        i++;
      }
      start = i + 1;
    }
  }
  if (start < s.length) {
    lines.push(s.slice(start));
  }
  return lines;
}

/**
 * The name of the cell magic `source` starts with (`sql` for `%%sql args`), or `null` when its
 * first line that is not blank is not a `%%name` line: as `cell_magic`, blank lines before it
 * are skipped, its indentation ignored, and the name runs to the first space of any kind.
 */
function cellMagicName(source: string): string | null {
  const first = source.split('\n').find(line => pyStrip(line) !== '');
  if (first === undefined) {
    return null;
  }
  const line = pyStrip(first);
  if (!line.startsWith('%%')) {
    return null;
  }
  let end = 2;
  while (end < line.length && !isSpace(line[end])) {
    end++;
  }
  return end > 2 ? line.slice(2, end) : null;
}

/** Whether every line that is not blank is a line magic, shell escape or comment, and one is not
 * a comment (`_only_line_magics`). */
function onlyLineMagics(source: string): boolean {
  const lines = pySplitLines(source)
    .map(pyStrip)
    .filter(line => line !== '');
  return (
    lines.length > 0 &&
    lines.every(line => /^[%!#]/.test(line) && !line.startsWith('%%')) &&
    lines.some(line => /^[%!]/.test(line))
  );
}

/** What a dsh kernel whose plain cell is `defaultCell` runs `source` as (`classify(...).kind`). */
export function cellKind(source: string, defaultCell: DefaultCell): CellKind {
  const name = cellMagicName(source);
  if (name !== null) {
    if (name === 'chat') {
      return 'chat';
    }
    if (name === 'sql') {
      return 'sql';
    }
    return 'python'; // %%python / %%py on dsh, and any other cell magic: IPython's
  }
  if (defaultCell === 'python' || onlyLineMagics(source)) {
    return 'python';
  }
  return 'chat';
}
