// The columns of the search results table. Patient, Observation and Encounter have the columns a person
// expects; every other type gets up to four of its summary elements (the R4 `isSummary` elements the
// server's `_summary=true` keeps, compiled at build time into generated/console-types.json), the ones
// that usually say what a resource is first.
import consoleTypes from '../../generated/console-types.json';
import { humanise } from './format';

export interface Column {
  readonly header: string;
  /** The element names whose value the cell shows, the first that is present. */
  readonly elements: readonly string[];
}

/** Every concrete R4 resource type, with its summary elements (without id, meta, implicitRules). */
export const SUMMARY_ELEMENTS: Readonly<Record<string, readonly string[]>> = consoleTypes.summaryElements;
export const RESOURCE_TYPES: readonly string[] = Object.keys(SUMMARY_ELEMENTS).sort();

const column = (header: string, ...elements: string[]): Column => ({ header, elements });

const BY_TYPE: Record<string, Column[]> = {
  Patient: [
    column('Name', 'name'),
    column('Gender', 'gender'),
    column('Birth date', 'birthDate'),
    column('Identifier', 'identifier'),
  ],
  Observation: [
    column('Code', 'code'),
    column('Value', 'value', 'component'),
    column('Date', 'effective', 'issued'),
    column('Subject', 'subject'),
  ],
  Encounter: [column('Class', 'class'), column('Period', 'period'), column('Subject', 'subject')],
};

/** Summary elements that usually say what a resource is, in the order they are picked. */
const FIRST = [
  'name',
  'title',
  'code',
  'medication',
  'status',
  'clinicalStatus',
  'type',
  'class',
  'intent',
  'subject',
  'patient',
  'beneficiary',
  'date',
  'effective',
  'onset',
  'authoredOn',
  'recordedDate',
  'occurrence',
  'period',
  'issued',
  'created',
  'description',
  'contentType',
];
/** Summary elements too large or too internal for a cell. */
const SKIPPED = new Set(['identifier', 'contained', 'extension', 'modifierExtension', 'language', 'text']);
const LARGE = new Set(['component', 'entry', 'link', 'content', 'parameter', 'hasMember', 'derivedFrom', 'signature']);

export const MAX_DEFAULT_COLUMNS = 4;

export function defaultColumns(summaryElements: readonly string[]): Column[] {
  const usable = summaryElements.filter((name) => !SKIPPED.has(name) && !LARGE.has(name));
  const rank = (name: string) => {
    const at = FIRST.indexOf(name);
    return at < 0 ? FIRST.length + usable.indexOf(name) : at;
  };
  return [...usable]
    .sort((a, b) => rank(a) - rank(b))
    .slice(0, MAX_DEFAULT_COLUMNS)
    .map((name) => column(humanise(name), name));
}

export function columnsFor(type: string): Column[] {
  return BY_TYPE[type] ?? defaultColumns(SUMMARY_ELEMENTS[type] ?? []);
}
