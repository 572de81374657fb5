// The second stage of the built-in generator: each sentence's category in the context of the visit. A
// sentence alone says little ("No.", "The left one looks normal.", "Can she go to school tomorrow?");
// the dialogue around it says where it belongs. One pass over the sentences, in order, with a little state
// (the question being answered, the phase of the visit, whether the chief complaint is known), so the
// cost is linear in the transcript. The rules (docs/scribe.md "The built-in generator"):
//   D1  the chief complaint: a clinician's question for the reason of the visit ("What brings you in?")
//       or statement of it ("We're following up on your blood pressure"), and the first sentence of the
//       answer that is not a pleasantry ("Morning. My knee hurts." gives "My knee hurts.");
//   D2  an answer takes its question's category: every sentence of the turn that replies to a question
//       of the other side (clinician ↔ patient or companion), but pleasantries and sentences that name
//       allergies or family history; a clinician's reply to a patient's question, its first sentence;
//   D3  the phase of the visit (history, examination, results, assessment, plan) is the category of the
//       clinician's last sentence outside the history, back to history when the clinician asks a history
//       question. In a clinician's statement, a history cue gives way to the phase ("No swelling in the
//       ankles." during the examination is a finding); a sentence with no cue takes the phase;
//   D4  a patient's question during the assessment or plan belongs to it ("Is it torn?", "Can she go to
//       school tomorrow?"); a patient's remark then, with no cue of its own, is left out ("That's a
//       relief."); before that it is history of the present illness;
//   D5  a symptom the clinician asks about, or the patient denies, in a body system of the chief complaint
//       is history of the present illness; in another system, review of systems;
//   D6  pleasantries ("Hi.", "I'm Dr. Hassan.", "Got it, thanks.") and announcements ("Let me take a
//       look.") are left out;
//   D7  when nothing is the chief complaint, the first history sentence no clinician said is.
import { BARE_ANSWER, isHistory, isPleasantry, matchRule, RULES_WITHOUT_COMPLAINT, systemsOf } from './rules.js';
import type { Category } from './rules.js';
import { isQuestion, parseTranscript } from './transcript.js';
import type { Role, Turn } from './transcript.js';

export interface ClassifiedSentence {
  /** Which turn (counted over all transcripts) the sentence belongs to. */
  readonly turn: number;
  readonly speaker: string | undefined;
  readonly role: Role;
  readonly sentence: string;
  /** The sentence's category, or undefined when it is left out of the note. */
  category: Category | undefined;
}

export type Phase = 'history' | 'exam' | 'results' | 'assessment' | 'plan';

/** A question waiting for its answer in the next turn. */
interface Question {
  readonly category: Category | undefined;
  readonly byClinician: boolean;
}

/** What the pass remembers: the phase of the visit and the chief complaint (D1, D3, D5). */
interface VisitState {
  phase: Phase;
  complaint: boolean;
  readonly complaintSystems: Set<string>;
}

/** The clinician's side: a clinician, or an unlabelled speaker (who may be either). */
const clinicianSide = (role: Role): boolean => role === 'clinician' || role === 'unknown';

/** The category of one sentence in its context (D1-D6), or undefined when it is left out. */
function resolve(
  sentence: string,
  index: number,
  turn: Turn,
  answering: Question | undefined,
  state: VisitState,
  complaintAnswered: boolean,
): Category | undefined {
  const question = isQuestion(sentence);
  const clinician = clinicianSide(turn.role);
  const complaintOpen = !state.complaint && state.phase !== 'assessment' && state.phase !== 'plan';
  // C4 first: "Come on in." is a pleasantry, not an instruction.
  const pleasantry = isPleasantry(sentence);
  const rule = pleasantry
    ? undefined
    : matchRule(sentence, turn.role, complaintOpen ? undefined : RULES_WITHOUT_COMPLAINT);
  if (rule?.announces) {
    if (clinician) state.phase = 'exam';
    return undefined; // D6
  }
  const own = rule?.category;
  const saysNothing = pleasantry && !BARE_ANSWER.test(sentence); // not even as an answer

  if (answering?.category === 'chief_complaint' && !clinician) {
    if (saysNothing) return undefined;
    return complaintAnswered ? (own ?? 'hpi') : 'chief_complaint'; // D1
  }
  if (answering?.category !== undefined && (!clinician || index === 0)) {
    if (own === 'allergies' || own === 'family') return own;
    return saysNothing ? undefined : answering.category; // D2
  }
  if (own !== undefined) {
    if (clinician && !question && isHistory(own) && own !== 'chief_complaint' && state.phase !== 'history') {
      return state.phase; // D3
    }
    if (!clinician && question && (state.phase === 'assessment' || state.phase === 'plan')) return state.phase; // D4
    if (own === 'ros' && narrowsComplaint(sentence, state)) return 'hpi'; // D5
    return own;
  }
  if (pleasantry) return undefined; // D6
  if (clinician) return state.phase === 'history' ? 'hpi' : state.phase; // D3
  if (state.phase === 'assessment' || state.phase === 'plan') return question ? state.phase : undefined; // D4
  if (state.phase === 'results') return question ? 'assessment' : undefined;
  return 'hpi';
}

/** D5: does the sentence name only symptoms in the body systems of the chief complaint? */
function narrowsComplaint(sentence: string, state: VisitState): boolean {
  if (state.complaintSystems.size === 0) return false;
  const systems = systemsOf(sentence);
  return systems.length > 0 && systems.every((system) => state.complaintSystems.has(system));
}

/** D3: the phase after a clinician's sentence of this category. */
function nextPhase(phase: Phase, category: Category | undefined, question: boolean): Phase {
  if (category === 'exam' || category === 'results' || category === 'assessment' || category === 'plan') {
    return category;
  }
  if (category === 'chief_complaint' || (category !== undefined && question)) return 'history';
  return phase;
}

/** Rules D1-D7 over every transcript, in order; a question is not carried from one transcript to the next. */
export function classifyTranscripts(transcripts: readonly string[]): ClassifiedSentence[] {
  const out: ClassifiedSentence[] = [];
  const state: VisitState = { phase: 'history', complaint: false, complaintSystems: new Set() };
  let turnNumber = 0;
  for (const transcript of transcripts) {
    let pending: Question | undefined;
    for (const turn of parseTranscript(transcript)) {
      const clinician = clinicianSide(turn.role);
      const answering = pending && pending.byClinician !== clinician ? pending : undefined;
      pending = undefined;
      let complaintAnswered = false;
      turn.sentences.forEach((sentence, index) => {
        const category = resolve(sentence, index, turn, answering, state, complaintAnswered);
        const question = isQuestion(sentence);
        if (category === 'chief_complaint') {
          state.complaint = true;
          if (!clinician) complaintAnswered = true;
        }
        if ((category === 'chief_complaint' || (complaintAnswered && category === 'hpi')) && !question) {
          for (const system of systemsOf(sentence)) state.complaintSystems.add(system);
        }
        if (clinician) state.phase = nextPhase(state.phase, category, question);
        if (index === turn.sentences.length - 1 && question) pending = { category, byClinician: clinician };
        out.push({ turn: turnNumber, speaker: turn.speaker, role: turn.role, sentence, category });
      });
      turnNumber++;
    }
  }
  if (!state.complaint) {
    // An unlabelled speaker may be the patient here: dictated or undiarized text has a complaint too.
    const first = out.find((s) => s.category === 'hpi' && s.role !== 'clinician' && !isQuestion(s.sentence));
    if (first) first.category = 'chief_complaint'; // D7
  }
  return out;
}
