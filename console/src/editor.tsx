// The JSON editor of a resource, new or stored. The server validates (R4 definitions, invariants); its
// OperationOutcome's issues are listed each next to the element path it names (expression, or location).
// Beside it, when the account may expand value sets, the code picker, whose Insert writes at the cursor.
import { useLayoutEffect, useRef, useState } from 'preact/hooks';
import type { JSX } from 'preact';
import { api, ApiError } from './api';
import type { OperationOutcomeIssue } from './api';
import { CodePicker } from './code-picker';
import { insertAt } from './codes';
import { may } from './scopes';

export interface EditorProps {
  readonly type: string;
  readonly initial: Record<string, unknown>;
  /** The stored resource's id and version (an update with If-Match), or none (a create). */
  readonly stored?: { readonly id: string; readonly versionId?: string };
  readonly onSaved: (resource: { resourceType: string; id: string }) => void;
  readonly onCancel: () => void;
  /** The account's scopes: the code picker needs `r` or `s` on ValueSet (`$expand`). */
  readonly scopes: readonly string[];
}

interface Problem {
  readonly path: string;
  readonly message: string;
}

function problemsOf(error: unknown): Problem[] {
  if (!(error instanceof ApiError)) return [{ path: '', message: String(error) }];
  if (error.issues.length === 0) return [{ path: '', message: error.message }];
  return error.issues
    .filter((i: OperationOutcomeIssue) => i.severity !== 'information')
    .map((i) => {
      const path = (i.expression ?? i.location ?? []).join(', ');
      const message = i.diagnostics ?? i.details?.text ?? i.code ?? '';
      // The diagnostics often start with the path too: said once, next to the message.
      return { path, message: path && message.startsWith(`${path}: `) ? message.slice(path.length + 2) : message };
    });
}

/** The id a create was given, from its Location (`.../Type/id/_history/1`) when it answered no body. */
function idFromLocation(location: string | null): string | undefined {
  return location ? /\/([^/]+)\/_history\/[^/]+$/.exec(new URL(location, 'http://x').pathname)?.[1] : undefined;
}

export function Editor({ type, initial, stored, onSaved, onCancel, scopes }: EditorProps): JSX.Element {
  const [text, setText] = useState(() => JSON.stringify(initial, null, 2));
  const area = useRef<HTMLTextAreaElement>(null);
  /** Where the caret goes once an insertion is rendered. */
  const caret = useRef<number | undefined>(undefined);
  useLayoutEffect(() => {
    if (caret.current === undefined || !area.current) return;
    area.current.focus();
    area.current.setSelectionRange(caret.current, caret.current);
    caret.current = undefined;
  }, [text]);
  // In place of the textarea's selection (it keeps it while a button has the focus).
  const insert = (snippet: string) => {
    const el = area.current;
    if (!el) return;
    const inserted = insertAt(el.value, el.selectionStart, el.selectionEnd, snippet);
    caret.current = inserted.caret;
    setText(inserted.text);
  };
  const [problems, setProblems] = useState<Problem[]>([]);
  const [busy, setBusy] = useState(false);
  const save = async (event: SubmitEvent) => {
    event.preventDefault();
    let resource: unknown;
    try {
      resource = JSON.parse(text);
    } catch (e) {
      setProblems([{ path: '', message: `The text is not JSON: ${(e as Error).message}` }]);
      return;
    }
    setBusy(true);
    try {
      const path = `/fhir/${encodeURIComponent(type)}${stored ? `/${encodeURIComponent(stored.id)}` : ''}`;
      const headers: Record<string, string> = { Prefer: 'return=representation' };
      if (stored?.versionId) headers['If-Match'] = `W/"${stored.versionId}"`;
      const response = await api<{ resourceType: string; id: string } | undefined>(path, {
        method: stored ? 'PUT' : 'POST',
        body: resource,
        headers,
      });
      const id = response.body?.id ?? stored?.id ?? idFromLocation(response.headers.get('location'));
      setProblems([]);
      if (id) onSaved({ resourceType: type, id });
    } catch (e) {
      setProblems(problemsOf(e));
    } finally {
      setBusy(false);
    }
  };
  return (
    <section class="editor" aria-labelledby="editor-heading">
      <h2 id="editor-heading">{stored ? `Edit ${type}/${stored.id}` : `New ${type}`}</h2>
      {problems.length > 0 && (
        <div class="problems" role="alert">
          <p>{stored ? 'Not saved:' : 'Not created:'}</p>
          <ul aria-label="Validation errors">
            {problems.map((p) => (
              <li>
                {p.path && <code class="path">{p.path}</code>}
                <span>{p.message}</span>
              </li>
            ))}
          </ul>
        </div>
      )}
      <div class="editor-body">
        <form class="editor-json" onSubmit={save}>
          <label for="resource-json">Resource JSON</label>
          <textarea
            id="resource-json"
            ref={area}
            value={text}
            onInput={(e) => setText(e.currentTarget.value)}
            spellcheck={false}
            autocomplete="off"
            rows={Math.min(20, Math.max(8, text.split('\n').length + 1))}
          />
          <div class="actions">
            <button type="submit" class="primary" disabled={busy}>
              Save
            </button>
            <button type="button" onClick={onCancel}>
              Cancel
            </button>
          </div>
        </form>
        {(may(scopes, 'ValueSet', 'r') || may(scopes, 'ValueSet', 's')) && <CodePicker type={type} onInsert={insert} />}
      </div>
    </section>
  );
}
