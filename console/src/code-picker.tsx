// The resource editor's code picker: a value set (offered: the type's top-level required bindings),
// a filter, the codes the server's `$expand` finds (docs/terminology.md), each with an Insert button that
// hands the editor the text for it (codes.ts says which text).
import { useState } from 'preact/hooks';
import type { JSX } from 'preact';
import { api } from './api';
import { bindingsOf, EXPAND_COUNT, expandPath, insertionFor } from './codes';
import type { ExpansionCode } from './codes';
import { ErrorText } from './parts';

interface Expansion {
  readonly valueSet: string;
  readonly total?: number;
  readonly codes: readonly ExpansionCode[];
}

export function CodePicker({ type, onInsert }: { type: string; onInsert: (text: string) => void }): JSX.Element {
  const bindings = bindingsOf(type);
  // Empty at first: the browser lists every offer for an empty field, only the matching ones otherwise.
  const [valueSet, setValueSet] = useState('');
  const [filter, setFilter] = useState('');
  const [result, setResult] = useState<Expansion | string | undefined>();
  const [busy, setBusy] = useState(false);
  const find = async (event: SubmitEvent) => {
    event.preventDefault();
    if (!valueSet.trim()) return;
    setBusy(true);
    try {
      const response = await api<{ expansion?: { total?: number; contains?: ExpansionCode[] } }>(
        expandPath(valueSet, filter),
      );
      const expansion = response.body?.expansion;
      setResult({ valueSet, total: expansion?.total, codes: expansion?.contains ?? [] });
    } catch (e) {
      setResult(e instanceof Error ? e.message : String(e));
    } finally {
      setBusy(false);
    }
  };
  return (
    <form class="code-picker" onSubmit={find} aria-labelledby="code-picker-heading">
      <h3 id="code-picker-heading">Codes</h3>
      <div class="code-picker-fields">
        <div class="field whole">
          <label for="code-value-set">Value set</label>
          <input
            id="code-value-set"
            list="code-value-sets"
            value={valueSet}
            onInput={(e) => setValueSet(e.currentTarget.value)}
            placeholder="http://hl7.org/fhir/ValueSet/..."
            spellcheck={false}
            autocomplete="off"
          />
          <datalist id="code-value-sets">
            {bindings.map((b) => (
              <option value={b.valueSet}>{`${type}.${b.element}`}</option>
            ))}
          </datalist>
        </div>
        <div class="field grow">
          <label for="code-filter">Filter</label>
          <input
            id="code-filter"
            value={filter}
            onInput={(e) => setFilter(e.currentTarget.value)}
            spellcheck={false}
            autocomplete="off"
          />
        </div>
        <button type="submit" disabled={busy || !valueSet.trim()}>
          Find codes
        </button>
      </div>
      {typeof result === 'string' && <ErrorText message={result} />}
      {typeof result === 'object' && <CodeList type={type} expansion={result} onInsert={onInsert} />}
    </form>
  );
}

function CodeList(props: { type: string; expansion: Expansion; onInsert: (text: string) => void }): JSX.Element {
  const { codes, total, valueSet } = props.expansion;
  if (codes.length === 0) return <p class="muted">No code matches.</p>;
  return (
    <>
      <ul class="codes" aria-label="Codes found">
        {codes.map((c) => (
          <li>
            <code>{c.code}</code>
            <span>{c.display ?? ''}</span>
            <span class="muted system">{c.system ?? ''}</span>
            {c.abstract ? (
              <span class="muted abstract">abstract: not for use</span>
            ) : (
              <button
                type="button"
                aria-label={`Insert ${c.code ?? ''}`}
                onClick={() => props.onInsert(insertionFor(props.type, valueSet, c))}
              >
                Insert
              </button>
            )}
          </li>
        ))}
      </ul>
      {total !== undefined && total > codes.length && (
        <p class="muted">
          The first {EXPAND_COUNT} of {total}: a filter narrows them.
        </p>
      )}
    </>
  );
}
