// The annotated visit transcripts of test/fixtures/scribe-visits (see its README): loading them, the
// transcript each one stands for, and scoring where the built-in generator puts each sentence against
// where the annotation says a clinician would.
import { readdirSync, readFileSync } from 'node:fs';
import { BUILTIN_TEMPLATES } from '../../src/scribe/builtin-templates.js';
import { placeSentences } from '../../src/scribe/engines/builtin/generator.js';

export const VISITS_DIR = new URL('../fixtures/scribe-visits/', import.meta.url);

/** The label of a sentence that belongs in no section (greetings, thanks, "let me take a look"). */
export const OMIT = 'omit';

export interface AnnotatedSentence {
  readonly text: string;
  /** The SOAP note's sections (template 1) a clinician would put the sentence in, or ["omit"]. */
  readonly soap: readonly string[];
  /** The history and physical's sections (template 2), or ["omit"]. */
  readonly hp: readonly string[];
}

export interface Visit {
  readonly file: string;
  readonly title: string;
  readonly setting: 'primary care' | 'urgent care' | 'follow-up';
  /** Development visits were looked at while the rules were written; holdout visits were not. */
  readonly split: 'development' | 'holdout';
  readonly turns: readonly { readonly speaker: string; readonly sentences: readonly AnnotatedSentence[] }[];
}

export function loadVisits(): Visit[] {
  return readdirSync(VISITS_DIR)
    .filter((name) => name.endsWith('.json'))
    .sort()
    .map((file) => ({ file, ...(JSON.parse(readFileSync(new URL(file, VISITS_DIR), 'utf8')) as Omit<Visit, 'file'>) }));
}

/** The transcript as a client submits it: one line per turn, `Speaker: sentence sentence ...`. */
export function transcriptOf(visit: Visit): string {
  return visit.turns.map((turn) => `${turn.speaker}: ${turn.sentences.map((s) => s.text).join(' ')}`).join('\n');
}

export const TEMPLATE_KEYS = { 1: 'soap', 2: 'hp' } as const;

export interface Placement {
  readonly visit: Visit;
  readonly sentence: string;
  readonly expected: readonly string[];
  /** The section title the generator put the sentence in, or "omit". */
  readonly got: string;
  readonly correct: boolean;
}

/**
 * Where the built-in generator puts each sentence of the visit for this template, against the annotation.
 * Throws when the generator does not split the transcript into the annotated sentences (then the two
 * cannot be compared sentence by sentence).
 */
export function placements(templateId: 1 | 2, visit: Visit): Placement[] {
  const titles = BUILTIN_TEMPLATES.get(templateId)!.sections.map((s) => s.title);
  const key = TEMPLATE_KEYS[templateId];
  const annotated = visit.turns.flatMap((turn) => turn.sentences);
  const placed = placeSentences(titles, [transcriptOf(visit)]);
  const split = placed.map((s) => s.sentence);
  if (split.join('\n') !== annotated.map((s) => s.text).join('\n')) {
    throw new Error(`${visit.file}: the generator splits the transcript into other sentences than the annotation`);
  }
  return placed.map((s, i) => {
    const got = s.section < 0 ? OMIT : titles[s.section];
    const expected = annotated[i][key];
    return { visit, sentence: s.sentence, expected, got, correct: expected.includes(got) };
  });
}

export interface Score {
  readonly correct: number;
  readonly total: number;
}

export const percent = (score: Score): string => `${((100 * score.correct) / score.total).toFixed(1)}%`;

export function scoreOf(list: readonly Placement[]): Score {
  return { correct: list.filter((p) => p.correct).length, total: list.length };
}
