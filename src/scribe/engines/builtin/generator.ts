// The built-in note generator: deterministic, offline, explainable. The transcript is split into speaker
// turns and sentences (transcript.ts), every sentence gets a category from its own words (rules.ts, C1)
// and the dialogue around it (dialogue.ts, D1-D7), and each template section shows the sentences of the
// categories it takes (rules.ts, S1-S3), quoted with their speaker, in transcript order; consecutive
// sentences of one turn share a line: `Patient: I have a cough. It started Monday.` An empty section
// reads "Not discussed." The same input always gives the same note. The rules are listed in
// docs/scribe.md.
import type { NoteGenerator, NoteRequest, NoteSection } from '../engine.js';
import { classifyTranscripts } from './dialogue.js';
import type { ClassifiedSentence } from './dialogue.js';
import { assignSections } from './rules.js';

export const EMPTY_SECTION_TEXT = 'Not discussed.';

export interface PlacedSentence extends ClassifiedSentence {
  /** The index of the template section that shows the sentence, or -1 when the note leaves it out. */
  readonly section: number;
}

/** Every sentence of the transcripts, in order, with the section of these titles that shows it. */
export function placeSentences(titles: readonly string[], transcripts: readonly string[]): PlacedSentence[] {
  const assignment = assignSections(titles);
  return classifyTranscripts(transcripts).map((s) => ({
    ...s,
    section: s.category === undefined ? -1 : assignment[s.category],
  }));
}

/** One section's text: the sentences in transcript order, one line per run of sentences of one turn. */
export function renderSentences(sentences: readonly ClassifiedSentence[]): string {
  const lines: string[] = [];
  let previousTurn = -1;
  for (const s of sentences) {
    if (s.turn === previousTurn) {
      lines[lines.length - 1] += ` ${s.sentence}`;
    } else {
      lines.push(s.speaker === undefined ? s.sentence : `${s.speaker}: ${s.sentence}`);
      previousTurn = s.turn;
    }
  }
  return lines.length > 0 ? lines.join('\n') : EMPTY_SECTION_TEXT;
}

export class BuiltinNoteGenerator implements NoteGenerator {
  readonly name = 'built-in';

  async generate(request: NoteRequest): Promise<NoteSection[]> {
    const titles = request.template.sections.map((s) => s.title);
    const placed = placeSentences(titles, request.transcripts);
    return titles.map((title, index) => ({
      title,
      text: renderSentences(placed.filter((s) => s.section === index)),
    }));
  }
}
