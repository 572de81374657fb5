// The built-in generator's rules: the cues that give one sentence a category (C1), the words they are
// made of, and which template section takes which categories (S1-S3). Data, not code, so that
// docs/scribe.md can list them and tests can pin them. What the dialogue around a sentence changes
// (questions and answers, the phase of the visit, the chief complaint) is in dialogue.ts.
import { isQuestion } from './transcript.js';
import type { Role } from './transcript.js';

export const CATEGORIES = [
  'chief_complaint',
  'hpi',
  'ros',
  'pmh',
  'medications',
  'allergies',
  'social',
  'family',
  'exam',
  'results',
  'assessment',
  'plan',
] as const;

export type Category = (typeof CATEGORIES)[number];

/** What the patient tells: the categories a "Subjective" or a generic "History" section takes. */
export const HISTORY_CATEGORIES: readonly Category[] = [
  'chief_complaint',
  'hpi',
  'ros',
  'pmh',
  'medications',
  'allergies',
  'social',
  'family',
];

export const isHistory = (category: Category): boolean => HISTORY_CATEGORIES.includes(category);

/**
 * Symptom words by body system. A symptom asked about or denied in the system of the chief complaint
 * belongs to the history of the present illness, one of another system to the review of systems (D5).
 */
export const BODY_SYSTEMS: Readonly<Record<string, string>> = {
  constitutional:
    'fevers?|feverish|chills|night sweats|sweats|weight (loss|gain|changes?)|(lost|gained) (some |any )?weight|fatigued?|tired(ness)?|exhausted|no energy|appetite|malaise',
  eyes: 'vision|visual|blurr(y|ed)|double vision|eyes? (pain|redness)|seeing (spots|flashes)',
  ent: 'sore throat|throat|ears?|earaches?|hearing|ringing|tinnitus|runny nose|stuffy|congest\\w*|sinus\\w*|sneez\\w*|swallow\\w*|hoarse\\w*',
  cardiovascular:
    'chest pain|palpitations|(heart|pulse) (racing|pounding|skipping)|racing heart|swelling in (your|my|his|her|the) (legs?|ankles?|feet)|(leg|ankle) swelling|faint\\w*|pass(ed)? out|syncope',
  respiratory:
    'cough\\w*|short(ness)? of breath|breathless\\w*|trouble breathing|wheez\\w*|whistl\\w*|phlegm|sputum|mucus|chest tightness',
  gastrointestinal:
    'nause\\w*|vomit\\w*|throw(ing)? up|threw up|sick to (my|your|her|his) stomach|diarrh\\w*|constipat\\w*|stomach (pain|ache|cramps?)|belly (pain|ache)|abdominal pain|heartburn|reflux|bowels?|stools?',
  genitourinary:
    'urinat\\w*|(blood in|dark) (the |your |my )?urine|pee|peeing|bladder|burn(s|ing)? when|frequency|urgency|discharge|periods?|menstrua\\w*|pregnan\\w*|flank',
  musculoskeletal:
    'joints?|knees?|back pain|lower back|shoulders?|hips?|ankles?|wrists?|elbows?|neck pain|muscle (pain|aches?)|aching|stiff\\w*|sprain\\w*|lock(ed|ing|s) up|locked|locking|gave way|given way|buckl\\w*|swollen up|swell(ed|ing) up',
  skin: 'rash\\w*|itch\\w*|hives|blisters?|sores?|lesions?|bruis\\w*|lumps?|dry skin',
  neurological:
    'headaches?|migraines?|dizz\\w*|lightheaded|vertigo|numb\\w*|tingl\\w*|weakness|seizures?|trouble speaking|slurred|confus\\w*|balance',
  psychiatric:
    'mood|depress\\w*|anxi\\w*|panic|sleep(ing)?|insomnia|(hurting|harming|hurt|harm) (yourself|myself)|suicid\\w*|better off dead',
  hematologic: 'bleeding|easy bruising|swollen glands',
};

const SYMPTOMS = Object.values(BODY_SYSTEMS).join('|') + '|pains?|painful|aches?|hurts?|hurting|sore|swelling|swollen';

const re = (source: string): RegExp => new RegExp(source, 'i');
const SYSTEM_PATTERNS = Object.entries(BODY_SYSTEMS).map(
  ([system, words]) => [system, re(`\\b(${words})\\b`)] as const,
);

/** The body systems whose symptom words a sentence names. */
export function systemsOf(sentence: string): string[] {
  const text = sentence.slice(0, MAX_RULE_INPUT);
  return SYSTEM_PATTERNS.filter(([, pattern]) => pattern.test(text)).map(([system]) => system);
}

/**
 * Medicines: common generic and brand names, and the stems that name drug classes (-pril, -sartan,
 * -olol, -statin, ...), so that most drugs are recognised without listing each one.
 */
export const DRUGS =
  'ibuprofen|acetaminophen|paracetamol|tylenol|advil|motrin|aleve|excedrin|aspirin|naproxen|diclofenac|meloxicam|celecoxib|tramadol|codeine|oxycodone|hydrocodone|morphine|gabapentin|pregabalin|amitriptyline|nortriptyline|cyclobenzaprine|methocarbamol|tizanidine|antibiotics?|amoxicillin|augmentin|azithromycin|zithromax|doxycycline|cephalexin|keflex|nitrofurantoin|macrobid|ciprofloxacin|levofloxacin|clindamycin|metronidazole|bactrim|trimethoprim|sulfamethoxazole|penicillin|erythromycin|clarithromycin|oseltamivir|tamiflu|valacyclovir|acyclovir|fluconazole|lisinopril|enalapril|ramipril|losartan|valsartan|irbesartan|amlodipine|nifedipine|diltiazem|verapamil|metoprolol|atenolol|carvedilol|propranolol|hydrochlorothiazide|hctz|chlorthalidone|furosemide|lasix|spironolactone|atorvastatin|lipitor|simvastatin|rosuvastatin|crestor|pravastatin|statins?|ezetimibe|metformin|glipizide|glyburide|glimepiride|insulin|lantus|humalog|januvia|sitagliptin|empagliflozin|jardiance|dapagliflozin|farxiga|semaglutide|ozempic|liraglutide|trulicity|levothyroxine|synthroid|prednisone|prednisolone|methylprednisolone|dexamethasone|hydrocortisone|triamcinolone|clobetasol|steroids?|albuterol|ventolin|proair|inhalers?|flovent|fluticasone|budesonide|formoterol|symbicort|advair|montelukast|singulair|tiotropium|spiriva|cetirizine|zyrtec|loratadine|claritin|fexofenadine|allegra|diphenhydramine|benadryl|omeprazole|prilosec|pantoprazole|esomeprazole|nexium|famotidine|pepcid|ranitidine|ondansetron|zofran|loperamide|imodium|docusate|miralax|sertraline|zoloft|fluoxetine|prozac|citalopram|escitalopram|lexapro|paroxetine|bupropion|wellbutrin|venlafaxine|duloxetine|cymbalta|trazodone|mirtazapine|buspirone|alprazolam|xanax|lorazepam|clonazepam|diazepam|zolpidem|quetiapine|aripiprazole|lithium|lamotrigine|levetiracetam|topiramate|sumatriptan|rizatriptan|warfarin|coumadin|apixaban|eliquis|rivaroxaban|xarelto|clopidogrel|plavix|heparin|enoxaparin|tamsulosin|flomax|finasteride|sildenafil|tadalafil|alendronate|fosamax|allopurinol|colchicine|methotrexate|hydroxychloroquine|phenazopyridine|birth control|contraceptives?|vitamin ?[a-z]?\\d*|multivitamins?|supplements?|calcium|iron pills?|fish oil|melatonin|nicotine (patch(es)?|gum)|\\w{3,}(pril|sartan|olol|statin|prazole|cillin|mycin|floxacin|cycline|dipine|gliflozin|gliptin|glutide|azepam|oxetine|triptan|tidine|parin|xaban)';

/** Tests and their reports: what a result sentence is about (with RESULT_WORDS, rule C1 "results"). */
export const TESTS =
  'labs?|lab (work|tests?|results?)|results?|blood (work|tests?|count)|(white|red) (blood )?(cell )?count|cbc|metabolic panel|x-?rays?|ct( scan)?|cat scan|mri|ultrasound|echo(cardiogram)?|ecg|ekg|stress test|a1c|hemoglobin|cholesterol|ldl|hdl|triglycerides|glucose|sugar level|potassium|sodium|creatinine|kidney function|liver (tests|function|enzymes)|thyroid (test|level)|tsh|iron (level|studies)|vitamin d level|psa|troponin|d-dimer|culture|biopsy|pathology|imaging|scan|swab|strep test|urine (test|sample|dip)|urinalysis|pregnancy test|covid test|flu test|phq-?9|gad-?7|score|mammogram|colonoscopy|pap( smear)?|spirometry|pulmonary function|bone density';

const RESULT_WORDS =
  'came back|come back (normal|negative|positive)|shows?|showed|shown|reveal(s|ed)?|confirm(s|ed)|(is|are|was|were|looks?|looked) (\\w+ )?(normal|abnormal|elevated|high|low|negative|positive|fine|good|unremarkable|clear|stable|better|worse|up|down)|down from|up from|(at|of) \\d|(is|are|was|were) (now |still |only |about |around )?\\d';

const BODY_PARTS =
  'head|eyes?|pupils|ears?|eardrums?|tympanic membranes?|nose|sinuses|throat|tonsils|mouth|tongue|teeth|gums|neck|thyroid|glands|lymph nodes|chest( wall)?|lungs?|heart( sounds)?|breath sounds|abdomen|belly|stomach|spine|skin|arms?|forearms?|hands?|fingers?|legs?|knees?|ankles?|feet|foot|toes?|hips?|shoulders?|elbows?|wrists?|joints?|muscles?|ligaments?|tendons?|reflexes|pulses?|sensation|strength|gait|balance|coordination|speech|affect|incision|wound|range of motion';

const FINDINGS =
  'normal|abnormal|clear|red|redness|swollen|tender|stable|enlarged|bulging|intact|symmetric|regular|irregular|soft|firm|warm|dry|moist|pale|equal|reactive|good|decreased|reduced|full|weak|strong|fine|unremarkable|inflamed|bruised|healing|healed|infected|positive|negative|brighter|alert';

/** Diagnoses, for "this is ..." and "you have ...": the suffixes of most (-itis, -osis, ...) and common ones. */
const DIAGNOSES =
  '\\w+itis|\\w+osis|\\w+emia|\\w+pathy|infection|strain|sprain|fracture|break|virus|flu|influenza|cold|strep( throat)?|migraines?|vertigo|eczema|asthma|pneumonia|reflux|ulcer|hernia|stones?|cyst|tear|injury|inflammation|dehydration|allergy|allergic reaction|poison ivy|gout|depression|anxiety|hypertension|diabetes|hypothyroidism|concussion|contusion|abscess|impetigo|shingles|angina|blood clot|spasm|sciatica|food poisoning|stomach bug|uti|panic attacks?|insomnia|rash|hives|wart|mole|burn|bite';

/** Speakers whose sentences a rule applies to; `unknown` (unlabelled text) is always allowed. */
type Speakers = 'anyone' | 'clinician' | 'patient';

export interface Rule {
  readonly category: Category;
  readonly speakers: Speakers;
  readonly pattern: RegExp;
  /** Only sentences that are (or are not) questions. */
  readonly question?: boolean;
  /**
   * An announcement ("Let me listen to your chest."): it starts the examination (the phase, D3) but says
   * nothing a note needs, so it is left out.
   */
  readonly announces?: boolean;
}

/** The words of an announcement after its verb: "... at your ears with my light", "... your vitals first". */
const ANNOUNCED = `(?:at|to|in|on|over|into|from|you|your|her|his|the|those|that|this|a|quick|quickly|now|first|again|for|me|with|my|light|before|doctor|comes|vitals|vital|signs|${BODY_PARTS})`;

/** How a clinician starts a sentence before its verb: "Okay, so ...", "For the neck, ...". */
const LEAD =
  '^(?:(?:okay|ok|alright|all right|so|and|also|now|then|just|well|please|first|great|good|for now|for the \\w+|in the meantime)[, ]+)*';

const INSTRUCTION_VERBS =
  "take|keep|stop|start|avoid|use|apply|drink|eat|rest|ice|elevate|wrap|wear|try|limit|cut|switch|increase|decrease|lower|reduce|add|continue|finish|call|come|return|follow|go|get|make|schedule|book|check|monitor|watch|write|bring|give|replace|rinse|wash|change|stay|skip|hold|let (me|us|someone) know|don't|do not|never|be sure|remember|plan on|expect";

/** Asking for the reason of the visit (D1 in dialogue.ts). */
const COMPLAINT_QUESTION =
  "what('s| is| has| was)? (brings?|brought|bringing) you|what can (i|we) (do for|help you with|help with)|how can (i|we) help|what('s| is) (going on|the (problem|matter|issue|trouble)|wrong|bothering you|been going on)|what happened|what seems to be|reason for (your|the|today's) visit|what are you (here|in) (for|about)|why are you here|what are we seeing (you|him|her) for";

/** Naming the reason of the visit, in a statement or a question ("..., is that right?"). */
const COMPLAINT_STATEMENT =
  "(you're|you are|she's|he's|she is|he is) here (today )?(for|about|because|to)\\b|i (hear|understand|see|saw) (that )?(you|she|he|they)('re| are|'ve| have| were| was| had| has)|(we're|we are|you're|you are) (here )?(following up|to follow up|here to follow up) on|follow(ing)?[- ]up (on|for) (your|her|his|the)|(we're|we are) here (today )?(to|for) (go over|talk about|discuss|check on|review|follow up)|this (visit|appointment) is (to|for|about)|(this|today) is (your|her|his) [\\w -]{0,30}(check-?up|follow-?up|visit|appointment|review)";

/**
 * Rule C1: the first rule (in this order) whose pattern matches a sentence and whose speakers include the
 * speaker's role gives the sentence its cue. Clinician-only rules keep a patient's "I think it started
 * on Monday" out of the assessment; patient-only rules keep a clinician's questions out of the history.
 */
export const RULES: readonly Rule[] = [
  { category: 'chief_complaint', speakers: 'clinician', question: true, pattern: re(COMPLAINT_QUESTION) },
  { category: 'chief_complaint', speakers: 'clinician', pattern: re(COMPLAINT_STATEMENT) },
  {
    category: 'chief_complaint',
    speakers: 'patient',
    pattern: re(
      "\\b(i'm|i am|we're|we are) here (today )?(for|because|about|to)\\b|brings? (me|us|him|her) in|\\b(came|come|coming) in (today )?(for|because|about|with)\\b|reason (i'm|i am|we're) here|main (problem|concern|complaint) is",
    ),
  },
  {
    category: 'exam',
    speakers: 'clinician',
    announces: true,
    pattern: re(
      `^(?:[^,]{0,40}, )?(?:(?:let me|let's|i('m| am)( just)? going to|i'll( just)?|i need to|i want to|can i|may i|i'd like to) (?:(?:(?:take|have) (?:a|another) (?:quick |good )?(?:look|listen|feel)|look|listen|examine|feel)(?: ${ANNOUNCED}){0,8}|(?:see|check|get|take)(?: ${ANNOUNCED}){1,8})|(?:i|we) (?:just )?need (?:a|some) (?:urine|blood|stool) sample(?: ${ANNOUNCED}){0,4})[.?!]?$`,
    ),
  },
  {
    category: 'results',
    speakers: 'anyone',
    pattern: re(`\\b(${TESTS})\\b.*\\b(${RESULT_WORDS})`),
  },
  {
    // The state of a known condition is the clinician's assessment, even when it names a measurement.
    category: 'assessment',
    speakers: 'clinician',
    question: false,
    pattern: re(
      "\\b((is|are|isn't|aren't|is not|are not|'s) (still |now |not |not quite )*(above|below|at|near|close to) (the |your )?(goal|target)|(well|poorly|not well|nicely|better) controlled|(isn't|is not|aren't|are not|not) (well |under )?controlled|(is|are) (responding|improving)|you('re| are) (recovering|healing|getting better))",
    ),
  },
  {
    // An opinion is the assessment, even when it names a finding ("I don't think it's torn, your strength
    // is good").
    category: 'assessment',
    speakers: 'clinician',
    question: false,
    pattern: re("^(so,? |okay,? |well,? )?i (don't |do not )?think (it|this|that|the|she|he|your|it's|this is)\\b"),
  },
  {
    // Asking the patient to move, breathe or say where it hurts: part of the examination.
    category: 'exam',
    speakers: 'clinician',
    pattern: re(
      `${LEAD}(can you |could you |i'm going to have you |i need you to |i want you to )?(take a (deep |big )?breath|breathe (in|out)|open (wide|up|your mouth)|say ah|stick out|lie (back|down)|sit (up|back|forward)|stand up|raise|lift (your|both|that|this)|push|pull|squeeze|follow my|look (up|down|at me|straight|to)|turn your head|bend|straighten|relax|cough for me|point to|touch your|walk (to|across|for)|hop)\\b|\\bdoes (this|that|it) hurt( (here|there|now|when i \\w+|if i \\w+)( (it|this|that|here|there))?)?\\?$|\\bwhen i (press|push|bend|move|touch|turn|squeeze|tap)\\b`,
    ),
  },
  {
    category: 'exam',
    speakers: 'clinician',
    question: false,
    pattern: re(
      `\\b(on exam(ination)?|(your |the )?(physical |neurological |neuro )?exam(ination)? (is|was|shows?|showed|reveals?)|(blood pressure|bp|pulse|heart rate|temperature|temp|oxygen( level| saturation| sat)?|o2 sat|sats?|respiratory rate|weight|bmi|peak flow)\\b[^.?!]{0,30}\\b(\\d|normal|high|low|fine|good|stable|the same|lying and standing)|orthostatic|\\d{2,3} over \\d{2,3}|\\d{2,3}/\\d{2,3}|mm ?hg|beats per minute|degrees|i (can )?(hear|see|feel|notice)(?! (that )?(you|she|he|they)('re| are|'ve| have| were| was| had| has))|i don't (hear|see|feel)|clear to auscultation|crackles|wheezes|rales|rhonchi|murmurs?|bowel sounds|(straight leg raise|drawer test|lachman|mcmurray|murphy's sign|romberg|phalen|tinel|spurling)|(there's|there is|there are) (a |an |some |no |mild |small |moderate )?(\\w+ ){0,3}(swelling|effusion|redness|tenderness|spasm|bruising|rash|blisters?|lesions?|discharge|fluid|nodules?|mass|lump|streaks)|no (signs? of|evidence of)|(${BODY_PARTS})( and (${BODY_PARTS}))? (\\w+ ){0,2}(is|are|looks?|feels?|sounds?|seems?|appears?|has|have) (\\w+ ){0,2}(${FINDINGS})\\b|\\btender(ness)?\\b)`,
    ),
  },
  {
    category: 'assessment',
    speakers: 'clinician',
    question: false,
    pattern: re(
      `\\b(my )?(assessment|diagnosis|impression|differential)\\b|consistent with|suggestive of|most likely|likely|probably|looks like|sounds? like|seems like|appears to be|i suspect|suspicious for|rule out|make(s)? me think|nothing to suggest|(don't|do not) think (it|this|that|the|she|he)|i think (this|it|that|she|he|the|your)\\b|^(so,? |okay,? |well,? )?(this|it)('s| is) (most likely |probably |likely |just |definitely |simply |called )?(a |an )?((simple|mild|moderate|severe|acute|chronic|allergic|viral|bacterial|benign|early|classic|typical|small|minor|bad) )*(\\w+ ){0,2}(${DIAGNOSES})\\b|\\b(you|she|he)('ve| have|'s| has) (got )?(a |an )?((mild|moderate|bad|small|minor) )?(\\w+ ){0,2}(${DIAGNOSES})\\b|side effect|can (also )?cause|caused by|(is|are) (normal|expected|common)( (after|with|for) [^.?!]*)?[.!]?$`,
    ),
  },
  {
    category: 'plan',
    speakers: 'clinician',
    question: false,
    pattern: re(
      `\\b(plan|we('ll| will| can| could| should)|i('ll| will)|let's|let us|i('m| am) going to|we('re| are) going to|i('d| would) (like|suggest|recommend|rather|want)|i want you to|you('ll| will) (want|need) to|you (can|could|should|may|might want to|need to|have to|must)|you('re| are) (due|going to need)|you (don't|do not) need|make sure|recommend\\w*|suggest\\w*|prescri\\w*|start (you|him|her) on|refer\\w*|follow[- ]?up|come back|return (to|if|in)|bring (her|him|them|it) back|schedul\\w*|order(ing)?|stop taking|continue (taking|the|your|with)|keep (taking|using|going|checking)|call (us|me|the office|the crisis)|emergency room|go to the er|(would|can|will) help|instructions?|information on|quit line)\\b|${LEAD}(${INSTRUCTION_VERBS})\\b|^if\\b.*\\b(call|come|go|return|bring|stop|let (me|us) know|see (me|us|a doctor))\\b`,
    ),
  },
  {
    // "How have you been since ...?": the interval history of a follow-up visit, whatever it names.
    category: 'hpi',
    speakers: 'clinician',
    question: true,
    pattern: re(
      "^how (have|are|has|is|'s) (you|things|she|he|it|your \\w+)( been)?( doing| feeling| going)?\\b.*\\b(since|lately|these days|recently|on (the|your)|with (the|your))\\b|^how('s| is| are) (the|your|her|his) [\\w -]{1,30} (going|working|treating you)\\b|\\bsince (i last saw you|your last visit|the last visit|last time|we (last )?(met|spoke|talked))",
    ),
  },
  { category: 'allergies', speakers: 'anyone', pattern: re('\\ballerg\\w*') },
  {
    category: 'family',
    speakers: 'anyone',
    pattern: re(
      '\\b(family history|runs in (the|my|our|your) family|anyone in (your|the|my) family|(mother|father|mom|mum|dad|brother|sister|parents?|grandmother|grandfather|grandparents?|aunt|uncle|siblings?|cousin)\\b.*\\b(had|has|have|died|passed|diagnosed|history|gets?|got|does|did))',
    ),
  },
  {
    category: 'social',
    speakers: 'anyone',
    pattern: re(
      "\\b(smok(e|es|ed|er|ing)|cigarettes?|tobacco|vap(e|es|ing)|alcohol|drink(s|ing)? (alcohol|socially|a (day|week|night)|per (day|week))|how much (do you |are you )?drink(ing)?|do you drink|beers?|wine|liquor|recreational|drugs|marijuana|cannabis|exercis\\w*|walk(s|ing)? (every|most|daily|each|\\d+|for \\d+|a few)|work(s|ing)? out|work(s|ing)? (as|at|in|for)|my job|occupation|what (do|does) (you|she|he) do for (work|a living)|what kind of work|retired|lives? (with|alone|by)|live (with|alone)|married|divorced|widowed|daycare|preschool|kindergarten|coffee|caffeine|salt|diet|pets?|dogs?|cats?|who (lives|is|'s) (with you|helping)|help(ing)? (you |him |her )?(out )?at home|staying with)\\b",
    ),
  },
  {
    category: 'pmh',
    speakers: 'anyone',
    pattern: re(
      "\\b(history of|diagnosed with|surger(y|ies)|operations?|operated|hospitali[sz]\\w*|past medical|medical (history|problems|conditions|issues)|health (problems|conditions|issues)|other (problems|conditions)|chronic|(had|have|has) (my|her|his) \\w+ (out|removed|replaced)|ever (been )?(told|diagnosed)|(shots|vaccin\\w*|immuni[sz]\\w*)|always been healthy|otherwise (she's|he's|i'm|healthy)|when (i|you|she|he) (was|were) (younger|a (kid|child|teen\\w*|baby))|as a (kid|child|teenager)|in (high school|college)|(have|has|had) (diabetes|type 2 diabetes|hypertension|high blood pressure|asthma|copd|heart disease|heart problems|cancer|arthritis|depression|thyroid|reflux|kidney disease)|(diabetes|hypertension|copd)\\b)|\\b(before|in the past|previously)\\?$",
    ),
  },
  {
    category: 'medications',
    speakers: 'anyone',
    pattern: re(
      `\\b(medications?|medicines?|meds|taking|pills?|tablets?|capsules?|prescriptions?|dose|dosage|\\d+ ?(mg|milligrams?|mcg|micrograms?|units?|puffs?)|over the counter|what (do|does) (you|she|he) take|(are|is) (you|she|he) (still )?(on|using)|${DRUGS})\\b`,
    ),
  },
  {
    category: 'ros',
    speakers: 'anyone',
    pattern: re(
      `\\b(denies|negative for|review of systems|any (\\w+ ){0,3}?(${SYMPTOMS}|problems with (your|her|his) \\w+)|(no|not any|haven't had any|have not had any|don't have any|do not have any|without) (${SYMPTOMS}))\\b`,
    ),
  },
  {
    category: 'hpi',
    speakers: 'anyone',
    pattern: re(
      `\\b(${SYMPTOMS}|since|started|began|begun|worse|worsening|better|improv\\w*|on and off|constant|comes and goes|how long|when did|for (about |almost |over |nearly |the (past|last) )?(a|an|one|two|three|four|five|six|seven|several|few|couple( of)?|\\d+) (days?|weeks?|months?|years?|hours?))\\b`,
    ),
  },
];

/** A bounded slice of a sentence that the rules look at, so that their cost is linear in the transcript. */
export const MAX_RULE_INPUT = 400;

/** Does a rule's speaker restriction admit this role? */
export function admits(speakers: Speakers, role: Role): boolean {
  if (role === 'unknown' || speakers === 'anyone') return true;
  if (speakers === 'clinician') return role === 'clinician';
  return role === 'patient' || role === 'companion';
}

/** Rule C1: the rule that gives one sentence its cue, or undefined when none matches. */
export function matchRule(sentence: string, role: Role, rules: readonly Rule[] = RULES): Rule | undefined {
  const question = isQuestion(sentence);
  const text = sentence.length > MAX_RULE_INPUT ? sentence.slice(0, MAX_RULE_INPUT) : sentence;
  return rules.find(
    (rule) =>
      (rule.question === undefined || rule.question === question) &&
      admits(rule.speakers, role) &&
      rule.pattern.test(text),
  );
}

/** The rules once the chief complaint is known: a second "what brings you in" is only history (D1). */
export const RULES_WITHOUT_COMPLAINT: readonly Rule[] = RULES.filter((rule) => rule.category !== 'chief_complaint');

/** Rule C1: the category of one sentence taken alone, or undefined when no rule matches. */
export function classify(sentence: string, role: Role): Category | undefined {
  return matchRule(sentence, role)?.category;
}

/** One piece of a pleasantry: a greeting, an introduction, a thank-you, an acknowledgement. */
const PLEASANTRY = re(
  "^((hi|hello|hey|(good )?(morning|afternoon|evening)|thanks|thank you) (there|doctor|doc|nurse|mom|dad|everyone|sir|ma'am)|hi|hello|hey|(good )?(morning|afternoon|evening)|welcome( back)?|come (on )?in|have a seat|take a seat|nice to (meet|see) you|good to see you( again)?|how are you( doing)?( today)?|how's it going|thanks?( you)?( so much| very much)?|thank you( so much)?|you're welcome|bye|goodbye|see you|take care|ok(ay)?|alright|all right|sure|great|perfect|wonderful|sounds good|got it|i see|makes sense|mm-?hmm|uh-?huh|oh|ah|good to know|will do|i will|it is|that's (great|good|wonderful|fine|good to hear|everything|all|it)|(i think )?that's (everything|all|it)|any (other )?questions( for me)?|no( more)? questions|doctor|doc|mom|dad|sir|ma'am|(one of )?(the|your) (\\w+ ){0,2}(doctors?|physicians?|nurses?|nurse practitioners?|physician assistants?|assistants?|residents?|providers?|students?)( here| today| on duty)?)$",
);
/**
 * A name: an introduction, a greeting or a title with a name, case-sensitive so that "I'm Jordan" and
 * "Good morning, Mr. Okafor" are pleasantries but "I'm pregnant" and "Morning sickness" are not.
 */
const NAMED =
  /^(?:(?:[Ii]'?m|[Ii] am|[Mm]y name is|[Tt]his is) (?:(?:Dr\.?|Doctor|Nurse) )?|(?:[Hh]i|[Hh]ello|[Hh]ey|(?:[Gg]ood )?(?:[Mm]orning|[Aa]fternoon|[Ee]vening)|[Tt]hanks|[Tt]hank you|[Ww]elcome back)(?: (?:Mr|Mrs|Ms|Miss|Dr)\.?)? |(?:Mr|Mrs|Ms|Miss|Dr)\.? )[A-Z][a-z'-]+$/;

/**
 * Rule C4: a sentence that is only pleasantries ("Hi.", "Good morning, Mr. Okafor.", "I'm Dr. Hassan.",
 * "Got it, thanks.") says nothing a note needs.
 */
export function isPleasantry(sentence: string): boolean {
  if (sentence.length > 160) return false;
  const parts = sentence
    .replace(/[.!?]+$/, '')
    .split(/\s*,\s*(?:and\s+)?|\s+and\s+/)
    .filter((part) => part !== '');
  return (
    parts.length > 0 &&
    parts.every((part) => PLEASANTRY.test(part) || NAMED.test(part) || /^(yes|yeah|no|nope)$/i.test(part))
  );
}

/**
 * A bare answer ("No.", "Yes, right there.", "Not really."): in reply to a question it means what the
 * question asked (D2), even when it is also a pleasantry ("No."); alone it says nothing.
 */
export const BARE_ANSWER = re(
  "^(yes|yeah|yep|yup|no|nope|nah|not really|never|not at all|none|correct|right|that's right|exactly|sometimes|a little|a bit|i do|i don't|i did|i didn't|i have|i haven't|she does|she doesn't|he does|he doesn't|mm-?hmm|uh-?huh)\\b[^?]{0,60}$",
);

export interface SectionRule {
  readonly pattern: RegExp;
  readonly categories: readonly Category[];
}

/**
 * Rule S1: the categories a template section takes, from its title: the first rule that matches the title
 * (case-insensitive). A section no rule matches is a free section.
 */
export const SECTION_RULES: readonly SectionRule[] = [
  {
    pattern: re(
      'chief complaint|reason for (the )?(visit|consult\\w*|referral|encounter)|presenting (complaint|problem)',
    ),
    categories: ['chief_complaint'],
  },
  { pattern: re('subjective'), categories: HISTORY_CATEGORIES },
  { pattern: re('present illness|\\bhpi\\b|interval history|history of (the )?present'), categories: ['hpi'] },
  { pattern: re('review of systems|\\bros\\b'), categories: ['ros'] },
  {
    pattern: re('past (medical |surgical )?history|\\bpmh\\b|medical history|surgical history|problem list'),
    categories: ['pmh'],
  },
  { pattern: re('allerg'), categories: ['allergies'] },
  { pattern: re('medication|prescription|\\bmeds\\b|\\bdrugs?\\b'), categories: ['medications'] },
  { pattern: re('social'), categories: ['social'] },
  { pattern: re('family'), categories: ['family'] },
  { pattern: re('objective'), categories: ['exam', 'results'] },
  { pattern: re('assessment (and|&) plan|\\ba ?/ ?p\\b|impression (and|&) plan'), categories: ['assessment', 'plan'] },
  { pattern: re('result|\\bdata\\b|\\blabs?\\b|laborator|diagnostic|imaging|investigation'), categories: ['results'] },
  { pattern: re('exam|physical|vital|finding'), categories: ['exam'] },
  { pattern: re('assessment|impression|diagnos|problem'), categories: ['assessment'] },
  {
    pattern: re('plan|recommendation|disposition|instruction|follow[- ]?up|next steps|treatment'),
    categories: ['plan'],
  },
  { pattern: re('history|background'), categories: HISTORY_CATEGORIES },
];

/**
 * Rule S3: where a category goes when no section takes it: to the section that takes its fallback (tried in
 * order), else to the template's first free section, else it is left out.
 */
export const FALLBACKS: Readonly<Record<Category, readonly Category[]>> = {
  chief_complaint: ['hpi'],
  hpi: ['chief_complaint'],
  ros: ['hpi'],
  pmh: ['hpi'],
  medications: ['pmh', 'hpi'],
  allergies: ['medications', 'pmh', 'hpi'],
  social: ['hpi'],
  family: ['pmh', 'hpi'],
  exam: ['results'],
  results: ['exam'],
  assessment: ['plan'],
  plan: ['assessment'],
};

/** Rule S1 for one title: its categories, or undefined for a free section. */
export function sectionCategories(title: string): readonly Category[] | undefined {
  return SECTION_RULES.find((rule) => rule.pattern.test(title))?.categories;
}

/**
 * Rules S2 and S3: for each category, the index of the section that shows it (or -1: left out). S2: a
 * category goes to the first section, in template order, that takes it, so that "Pertinent History"
 * after "History of Present Illness" gets the rest of the history but not the present illness.
 */
export function assignSections(titles: readonly string[]): Record<Category, number> {
  const taken = titles.map((title) => sectionCategories(title));
  const direct = (category: Category): number => taken.findIndex((categories) => categories?.includes(category));
  const firstFree = taken.findIndex((categories) => categories === undefined);
  const assignment = {} as Record<Category, number>;
  for (const category of CATEGORIES) {
    let index = direct(category);
    for (const fallback of FALLBACKS[category]) {
      if (index >= 0) break;
      index = direct(fallback);
    }
    assignment[category] = index >= 0 ? index : firstFree;
  }
  return assignment;
}
