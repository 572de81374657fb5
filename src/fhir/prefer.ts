// The Prefer header (https://hl7.org/fhir/R4/http.html#ops, search.html#errors): what a write answers
// and whether a search refuses parameters it does not know.

export type PreferredReturn = 'minimal' | 'representation' | 'OperationOutcome';

export function preferredReturn(prefer: string | undefined): PreferredReturn {
  const match = /return\s*=\s*"?(minimal|representation|OperationOutcome)"?/i.exec(prefer ?? '');
  if (!match) return 'representation';
  const value = match[1].toLowerCase();
  return value === 'minimal' ? 'minimal' : value === 'operationoutcome' ? 'OperationOutcome' : 'representation';
}

/** `Prefer: respond-async` (https://hl7.org/fhir/R4/async.html): the request runs as a job. */
export function preferRespondAsync(prefer: string | undefined): boolean {
  return (prefer ?? '').split(/[,;]/).some((token) => token.trim().toLowerCase() === 'respond-async');
}

/** The Prefer header without `respond-async` (what a job runs the request with), or undefined when empty. */
export function withoutRespondAsync(prefer: string | undefined): string | undefined {
  const rest = (prefer ?? '')
    .split(',')
    .map((part) => part.trim())
    .filter((part) => part !== '' && part.toLowerCase() !== 'respond-async');
  return rest.length > 0 ? rest.join(', ') : undefined;
}

/** `Prefer: handling=strict`: unknown search parameters are an error, not ignored. */
export function preferStrict(prefer: string | undefined): boolean {
  return /handling\s*=\s*strict/i.test(prefer ?? '');
}
