// Transcript → speaker turns → sentences: the first stage of the built-in generator. Pure functions.
//
// Rules (docs/scribe.md "The built-in generator"):
//   T1. A line that starts with a speaker label, `Label: text`, starts a new turn. A label is one to three
//       words of letters, digits, dots, apostrophes or hyphens (at most 40 characters) starting with a
//       letter: `Doctor:`, `Dr. Patel:`, `Patient:`, `Speaker 2:`, `SPEAKER_01:`. A leading time stamp
//       in brackets (`[00:01:15] Doctor: ...`) is ignored. Text starting with a digit after an unknown label
//       (`BP: 120/80`) is not a turn, after a role's label (`Patient: 40 milligrams.`) it is. A line
//       without a label continues the turn before it; a transcript without any label is one turn without
//       a speaker.
//   T2. A label names a role: clinician (doctor, dr, physician, clinician, provider, nurse, np, pa, md,
//       rn, practitioner, resident, attending, medical assistant), patient (patient, pt, client) or
//       companion (mother, father, parent, wife, husband, spouse, partner, son, daughter, caregiver,
//       guardian, family, friend, interpreter); any other label is unknown.
//   T3. When no turn is a clinician's and two or more unknown speakers talk, the unknown speaker who asks
//       the most questions (ties: the first to speak) is taken for the clinician and the other unknown
//       speakers for patients (diarized transcripts label speakers `Speaker 1`, `Speaker 2`).
//   T5. A sentence is a question when it ends with `?`, or has no end mark and starts like a question.
//   T4. Sentences end at `.`, `!` or `?` (with any closing quotes or brackets) followed by white space and
//       an upper-case letter, a quote or a bracket, or at the end of the turn; `Dr.`, `Mr.`, `Mrs.`,
//       `Ms.`, `St.`, `vs.`, `e.g.`, `i.e.`, `approx.`, `Prof.`, `Jr.`, `Sr.` do not end one, and neither
//       does a dot inside a number (`98.6`).

export type Role = 'clinician' | 'patient' | 'companion' | 'unknown';

export interface Turn {
  /** The label as written (`Dr. Patel`), or undefined for unlabelled text. */
  readonly speaker: string | undefined;
  readonly role: Role;
  readonly sentences: readonly string[];
}

const LABELLED_LINE = /^\s*(?:\[[^\]]{0,20}\]\s*)?([A-Za-z][A-Za-z0-9.'’_-]*(?: [A-Za-z0-9.'’_-]+){0,2})\s*:\s*(.*)$/;
const MAX_LABEL_LENGTH = 40;

const CLINICIAN =
  /^(dr|doctor|physician|clinician|provider|nurse|np|pa|md|rn|do|practitioner|nurse practitioner|physician assistant|resident|attending|medical assistant|ma|therapist|surgeon)\b/;
const PATIENT = /^(patient|pt|client)\b/;
const COMPANION =
  /^(mother|father|mom|mum|dad|parent|wife|husband|spouse|partner|son|daughter|caregiver|carer|guardian|family|friend|interpreter|sister|brother)\b/;

/** The role a speaker label names (rule T2). */
export function roleOf(label: string | undefined): Role {
  if (label === undefined) return 'unknown';
  const normalized = label.toLowerCase().replace(/\./g, ' ').replace(/\s+/g, ' ').trim();
  if (CLINICIAN.test(normalized)) return 'clinician';
  if (PATIENT.test(normalized)) return 'patient';
  if (COMPANION.test(normalized)) return 'companion';
  return 'unknown';
}

const ABBREVIATIONS = new Set([
  'dr',
  'mr',
  'mrs',
  'ms',
  'st',
  'vs',
  'e.g',
  'i.e',
  'eg',
  'ie',
  'approx',
  'prof',
  'jr',
  'sr',
]);

/** Splits a turn's text into sentences (rule T4). */
export function splitSentences(text: string): string[] {
  const normalized = text.replace(/\s+/g, ' ').trim();
  if (normalized === '') return [];
  const sentences: string[] = [];
  // A boundary starts only where a run of stops starts, so that a long run ("!!!!...") is tried once.
  const boundary = /(?<![.!?])[.!?]+["'”’)\]]*(?= (["'“‘([]|[A-Z])|$)/g;
  let start = 0;
  for (let match = boundary.exec(normalized); match; match = boundary.exec(normalized)) {
    const end = match.index + match[0].length;
    // The word before the dot, from a bounded look-back (an abbreviation is short), so that a long run of
    // letters costs no more than a short one.
    const before = normalized.slice(Math.max(start, match.index - 12), match.index);
    const lastWord = /(?:^|[^A-Za-z.])([A-Za-z.]+)$/.exec(before)?.[1]?.toLowerCase();
    if (match[0] === '.' && lastWord !== undefined && ABBREVIATIONS.has(lastWord)) continue;
    const sentence = normalized.slice(start, end).trim();
    if (sentence !== '') sentences.push(sentence);
    start = end;
    if (end >= normalized.length) break;
  }
  const rest = normalized.slice(start).trim();
  if (rest !== '') sentences.push(rest);
  return sentences;
}

/** A question's first word, after any "so", "and", "okay", "um" (for text transcribed without a "?"). */
const QUESTION_START =
  /^(?:(?:so|and|okay|ok|um|uh|well|now|alright|and then)[, ]+)*(?:do|does|did|are|is|was|were|have|has|had|can|could|would|will|should|may|any|what|what's|when|where|why|how|how's|which|who)\b/i;

/**
 * Rule T5: a sentence is a question when it ends with "?", or when it has no end mark at all (speech
 * transcribed without punctuation) and starts like one ("any numbness in your legs").
 */
export function isQuestion(sentence: string): boolean {
  if (sentence.endsWith('?')) return true;
  return !/[.!]["'”’)\]]*$/.test(sentence) && QUESTION_START.test(sentence);
}

interface RawTurn {
  speaker: string | undefined;
  lines: string[];
}

/** Splits one transcript into turns (rules T1-T3). */
export function parseTranscript(transcript: string): Turn[] {
  const raw: RawTurn[] = [];
  for (const line of transcript.split(/\r?\n/)) {
    const match = LABELLED_LINE.exec(line);
    if (match && match[1].length <= MAX_LABEL_LENGTH && (!/^\d/.test(match[2]) || roleOf(match[1]) !== 'unknown')) {
      raw.push({ speaker: match[1].trim(), lines: [match[2]] });
    } else if (line.trim() !== '') {
      if (raw.length === 0) raw.push({ speaker: undefined, lines: [] });
      raw[raw.length - 1].lines.push(line);
    }
  }
  const turns = raw
    .map((t) => ({ speaker: t.speaker, role: roleOf(t.speaker), sentences: splitSentences(t.lines.join(' ')) }))
    .filter((t) => t.sentences.length > 0);
  return inferRoles(turns);
}

/** Rule T3: in a transcript of unknown speakers, the one who asks the most questions is the clinician. */
function inferRoles(turns: Turn[]): Turn[] {
  if (turns.some((t) => t.role === 'clinician')) return turns;
  const questions = new Map<string, number>();
  for (const turn of turns) {
    if (turn.role !== 'unknown' || turn.speaker === undefined) continue;
    const asked = turn.sentences.filter(isQuestion).length;
    questions.set(turn.speaker, (questions.get(turn.speaker) ?? 0) + asked);
  }
  if (questions.size < 2) return turns;
  let clinician: string | undefined;
  let most = -1;
  for (const [speaker, asked] of questions) {
    if (asked > most) {
      clinician = speaker;
      most = asked;
    }
  }
  return turns.map((t) =>
    t.role !== 'unknown' || t.speaker === undefined
      ? t
      : { ...t, role: t.speaker === clinician ? ('clinician' as const) : ('patient' as const) },
  );
}
