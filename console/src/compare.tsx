// Two versions of a resource side by side, line by line of their JSON, the lines that differ marked
// (jsdiff's line diff: removed lines on the left, added ones on the right, aligned).
import { diffLines } from 'diff';
import type { JSX } from 'preact';

interface Row {
  left?: string;
  right?: string;
  kind: 'same' | 'changed';
}

/** Rows of the side-by-side view: unchanged lines on both sides, a removal paired with the addition after it. */
export function sideBySide(before: string, after: string): Row[] {
  const rows: Row[] = [];
  const lines = (value: string) => value.replace(/\n$/, '').split('\n');
  const parts = diffLines(before, after);
  for (let i = 0; i < parts.length; i++) {
    const part = parts[i];
    if (!part.added && !part.removed) {
      for (const line of lines(part.value)) rows.push({ left: line, right: line, kind: 'same' });
      continue;
    }
    const removed = part.removed ? lines(part.value) : [];
    const next = part.removed ? parts[i + 1] : undefined;
    const added = part.added ? lines(part.value) : next?.added ? lines(next.value) : [];
    if (next?.added) i++;
    for (let j = 0; j < Math.max(removed.length, added.length); j++) {
      rows.push({ left: removed[j], right: added[j], kind: 'changed' });
    }
  }
  return rows;
}

export function Comparison({
  left,
  right,
  leftLabel,
  rightLabel,
}: {
  left: unknown;
  right: unknown;
  leftLabel: string;
  rightLabel: string;
}): JSX.Element {
  const rows = sideBySide(JSON.stringify(left, null, 2), JSON.stringify(right, null, 2));
  return (
    <div class="table-wrap">
      <table class="compare">
        <caption class="visually-hidden">
          {leftLabel} and {rightLabel} side by side
        </caption>
        <thead>
          <tr>
            <th scope="col">{leftLabel}</th>
            <th scope="col">{rightLabel}</th>
          </tr>
        </thead>
        <tbody>
          {rows.map((row) => (
            <tr class={row.kind}>
              <td class={row.kind === 'changed' && row.left !== undefined ? 'removed' : undefined}>
                <pre>{row.left ?? ''}</pre>
              </td>
              <td class={row.kind === 'changed' && row.right !== undefined ? 'added' : undefined}>
                <pre>{row.right ?? ''}</pre>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
