import { AppError } from '../errors.js';

// Small parsers shared by the interactions that take query parameters (history now, search later).

export const DEFAULT_PAGE_SIZE = 20;
export const MAX_PAGE_SIZE = 1000;

/** _count: default 20, above 1000 served as 1000, 0 allowed (docs/api.md). */
export function parseCount(raw: string | undefined): number {
  if (raw === undefined || raw === '') return DEFAULT_PAGE_SIZE;
  if (!/^[0-9]{1,9}$/.test(raw)) {
    throw new AppError('invalid-search', `_count must be a non-negative integer, got "${raw}"`, {
      expression: '_count',
    });
  }
  return Math.min(Number(raw), MAX_PAGE_SIZE);
}

const INSTANT =
  /^([0-9]{4})(-(0[1-9]|1[0-2])(-(0[1-9]|[12][0-9]|3[01])(T([01][0-9]|2[0-3]):[0-5][0-9](:([0-5][0-9]|60)(\.[0-9]{1,9})?)?(Z|[+-]((0[0-9]|1[0-3]):[0-5][0-9]|14:00))?)?)?)?$/;

/** A FHIR date or dateTime query value → the start of the time it names, in ms (UTC when no zone). */
export function parseInstantParameter(name: string, raw: string): number {
  const match = INSTANT.exec(raw);
  if (!match) {
    throw new AppError('invalid-search', `${name} must be a FHIR date or dateTime, got "${raw}"`, { expression: name });
  }
  let text = raw;
  if (raw.length === 4) text = `${raw}-01-01`;
  else if (raw.length === 7) text = `${raw}-01`;
  if (text.includes('T') && !/(Z|[+-][0-9]{2}:[0-9]{2})$/.test(text)) text += 'Z';
  const ms = Date.parse(text.length === 10 ? `${text}T00:00:00Z` : text);
  if (Number.isNaN(ms)) {
    throw new AppError('invalid-search', `${name} is not a valid date: "${raw}"`, { expression: name });
  }
  return ms;
}

/** A query string's parameters, a repeated one by its last value (history's `_count`, `_since`, ...). */
export function lastValues(query: string): Record<string, string> {
  return Object.fromEntries(new URLSearchParams(query));
}
