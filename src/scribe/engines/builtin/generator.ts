// The built-in note generator: deterministic, offline, explainable. The transcript is split into speaker
// turns and sentences (transcript.ts), every sentence gets one category by fixed rules (rules.ts), and each
// template section shows the sentences of the categories it takes, quoted with their speaker. The same input
// always gives the same note. The rules are listed in docs/scribe.md; in short:
//   C1  the first matching rule of RULES gives a sentence its category;
//   C2  the first sentence of the answer to "what brings you in?" is the chief complaint;
//   C3  in the turn right after a question that has a category, the first sentence (when no rule or only the
//       history rule matched it) and any later sentence no rule matches take the question's category, so
//       "Any allergies?" - "No." and "Any allergies?" - "Penicillin gives me a rash." land in Allergies;
//   C4  other sentences that are only pleasantries ("Hi.", "Thank you.", "Okay.") are left out;
//   C5  everything else is history of the present illness;
//   C6  when nothing is the chief complaint, the patient's first history sentence is;
//   S1-S3 sections take categories by their titles (rules.ts), sentences keep transcript order, and
//       consecutive sentences of one turn share a line: `Patient: I have a cough. It started Monday.`
//   An empty section reads "Not discussed."
import type { NoteGenerator, NoteRequest, NoteSection } from '../engine.js';
import { assignSections, classify, SMALL_TALK } from './rules.js';
import type { Category } from './rules.js';
import { parseTranscript } from './transcript.js';
import type { Role } from './transcript.js';

export const EMPTY_SECTION_TEXT = 'Not discussed.';

export interface ClassifiedSentence {
  /** Which turn (counted over all transcripts) the sentence belongs to. */
  readonly turn: number;
  readonly speaker: string | undefined;
  readonly role: Role;
  readonly sentence: string;
  category: Category;
}

const tellsHistory = (role: Role): boolean => role !== 'clinician';

/** Rules C1-C6 over every transcript, in order. */
export function classifyTranscripts(transcripts: readonly string[]): ClassifiedSentence[] {
  const out: ClassifiedSentence[] = [];
  let turnNumber = 0;
  for (const transcript of transcripts) {
    let questionCategory: Category | undefined;
    for (const turn of parseTranscript(transcript)) {
      const inherited = questionCategory;
      questionCategory = undefined;
      let answeredComplaint = false;
      turn.sentences.forEach((sentence, index) => {
        let category = classify(sentence, turn.role);
        const smallTalk = category === undefined && SMALL_TALK.test(sentence);
        if (inherited === 'chief_complaint') {
          if (!answeredComplaint && !smallTalk && tellsHistory(turn.role)) {
            category = 'chief_complaint'; // C2
            answeredComplaint = true;
          }
        } else if (inherited !== undefined && (category === undefined || (index === 0 && category === 'hpi'))) {
          category = inherited; // C3
        }
        // C4: small talk stays out; C5: the rest is history of the present illness.
        if (category === undefined && !smallTalk) category = 'hpi';
        const last = index === turn.sentences.length - 1;
        if (last && sentence.endsWith('?')) questionCategory = category;
        if (category !== undefined) {
          out.push({ turn: turnNumber, speaker: turn.speaker, role: turn.role, sentence, category });
        }
      });
      turnNumber++;
    }
  }
  if (!out.some((s) => s.category === 'chief_complaint')) {
    const first = out.find((s) => s.category === 'hpi' && tellsHistory(s.role) && !s.sentence.endsWith('?'));
    if (first) first.category = 'chief_complaint'; // C6
  }
  return out;
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
    const assignment = assignSections(titles);
    const sentences = classifyTranscripts(request.transcripts);
    return titles.map((title, index) => ({
      title,
      text: renderSentences(sentences.filter((s) => assignment[s.category] === index)),
    }));
  }
}
