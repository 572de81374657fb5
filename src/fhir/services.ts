import type { Principal } from '../auth/principal.js';
import type { AppError } from '../errors.js';
import type { Config } from '../config.js';
import type { CursorKey } from '../page-cursor.js';
import type { CompartmentRule } from '../definitions/registry.js';
import type { ReadBudget, SqlExecutor } from '../storage/sql/database.js';
import type { IndexWriter, ResourceStore } from '../storage/store.js';
import type { WritePositions } from '../storage/write-positions.js';
import type { ReferenceParser } from './references.js';
import type { ElementDefinitions } from './elements.js';
import type { FhirResponse } from './response.js';
import type { CallHeader, FhirRouter } from './routing.js';
import type { ValidationIssue } from '../validation/validate.js';

/** The R4 knowledge the FHIR layer needs (backed by the compiled definitions, see definitions/). */
export interface ResourceTypes extends ElementDefinitions {
  readonly resourceTypes: readonly string[];
  isResourceType(name: string): boolean;
  /** The R4 compartment of resources of type `code`, if R4 defines one. */
  compartment(code: string): CompartmentRule | undefined;
  readonly compartments: readonly CompartmentRule[];
}

export interface ProfileCheckOptions {
  /** Profiles to check besides those of meta.profile ($validate's `profile`). */
  readonly explicit?: readonly string[];
  /** Warn about what is not checked (an unknown profile, a value set the server cannot expand): $validate. */
  readonly reportUnknown?: boolean;
}

/** Enforcement of the StructureDefinitions stored on the server (docs/validation.md, "Profiles"). */
export interface ProfileChecker {
  /** The issues of `resource` (already valid R4) against the stored profiles it names; an unknown one is skipped. */
  check(
    request: FhirRequest,
    resource: Record<string, unknown>,
    options?: ProfileCheckOptions,
  ): Promise<ValidationIssue[]>;
  /**
   * Refuses (422 `profile-invalid`) a profile whose elements cannot be read: paths outside its type, bad
   * slice names or cardinalities, more elements than the bound. Its base need not be stored yet.
   */
  checkDefinition(definition: Record<string, unknown>): void;
  /** The stored profiles' canonical urls and versions, and the type each constrains, for the CapabilityStatement. */
  supported(): Promise<{ url: string; version?: string; type: string }[]>;
}

/** A search parameter as the CapabilityStatement lists it. */
export interface CapabilitySearchParam {
  readonly name: string;
  readonly type: string;
  readonly definition?: string;
  readonly documentation?: string;
}

export interface SearchOptions {
  /** Prefer: handling=strict: unknown or unsupported parameters are 400 instead of being reported. */
  readonly strict: boolean;
  /**
   * An open transaction to search in (a GET entry of a transaction Bundle): the search sees its writes
   * and runs on its connection instead of a bounded read (search/transaction-runner.ts).
   */
  readonly executor?: SqlExecutor;
  /**
   * Only parse and plan (access, parameters, cost limits): what can refuse the search before it runs.
   * Answers an empty 200; a transaction checks with it the searches it runs after its commit.
   */
  readonly planOnly?: boolean;
}

/** The search engine (search/): index maintenance on write and the search interaction. */
export interface SearchEngine {
  /** Keeps the index tables in step with every write, inside the write's transaction. */
  readonly indexWriter: IndexWriter;
  /**
   * True where a statement inside a write transaction cannot be stopped at the search budget (SQLite:
   * the writer runs on the event loop): a transaction Bundle's searches then run after its commit, as
   * bounded reads (docs/storage.md, "Searches and conditional criteria of a write").
   */
  readonly searchesAfterCommit: boolean;
  /**
   * https://hl7.org/fhir/R4/search.html: GET /fhir/{type}?..., POST /fhir/{type}/_search (type given),
   * and GET /fhir?_type=... (type undefined). `params` are the decoded name/value pairs in request order.
   */
  search(
    request: FhirRequest,
    type: string | undefined,
    params: ReadonlyArray<readonly [string, string]>,
    options: SearchOptions,
  ): Promise<FhirResponse>;
  /**
   * https://hl7.org/fhir/R4/search.html#2.21.1.2: GET /fhir/{compartment}/{id}/{type}?... (`type` may be
   * `*`: every member type the caller may search), inside the R4 compartment of `compartment/id`.
   */
  compartmentSearch(
    request: FhirRequest,
    compartment: string,
    id: string,
    type: string,
    params: ReadonlyArray<readonly [string, string]>,
    options: SearchOptions,
  ): Promise<FhirResponse>;
  /**
   * https://hl7.org/fhir/R4/patient-operation-everything.html: the compartment of `Patient/id` (types the
   * caller may read) and what it refers to, paged. The caller's access to the Patient is checked before.
   */
  everything(request: FhirRequest, id: string, params: ReadonlyArray<readonly [string, string]>): Promise<FhirResponse>;
  /**
   * The ids of the resources of `type` matching search criteria (`identifier=sys|value`), at most
   * `limit`, inside the write transaction `executor` (so conditional writes see their own transaction
   * and hold its locks), within the request's search budget (422 `too-costly` past it). With `ahead`
   * (findIdsAhead's answer) only the resources written since it are searched again (StaleMatchesError
   * where that cannot say). Unknown parameters are an error here, never ignored; a chain or `_has`
   * through a type the caller may not search is a 403, exactly as in a search, so that criteria cannot
   * probe data the caller may not see.
   */
  findIds(
    request: FhirRequest,
    executor: SqlExecutor,
    type: string,
    query: string,
    options: { readonly limit: number; readonly ahead?: MatchesAhead },
  ): Promise<string[]>;
  /**
   * Where the database cannot stop a statement inside a write transaction (SQLite, whose writer runs on
   * the event loop), the criteria searched before the transaction, as a bounded read (interruptible, off
   * the event loop), with the point in the history they saw; elsewhere undefined (findIds searches in
   * the transaction, bounded there). docs/storage.md, "Conditional writes".
   */
  findIdsAhead(request: FhirRequest, type: string, query: string, limit: number): Promise<MatchesAhead | undefined>;
  /**
   * Checks a Subscription's criteria (`query` on `type`) as conditional criteria are checked: parsed and
   * planned strictly with the caller's scopes (403 through a type it may not search), never run.
   */
  checkCriteria(request: FhirRequest, type: string, query: string): void;
  /**
   * Which of the resources `pks` (of `type`) match each item's criteria now, as that item's subscriber: each
   * candidate probed by its primary key, up to 50 criteria per statement (bounded reads; inside the
   * transaction `executor` when given, which sees that transaction's writes). For each item the pks it
   * matches, or the AppError that refuses it (its plan, or its cost alone).
   */
  matchesAmongMany(
    items: readonly { readonly request: FhirRequest; readonly query: string }[],
    type: string,
    pks: readonly number[],
    executor?: SqlExecutor,
  ): Promise<(number[] | AppError)[]>;
  /** The parameters the engine supports on a type, for the CapabilityStatement. */
  capabilitySearchParams(type: string): CapabilitySearchParam[];
  /** The `_include` and `_revinclude` values the engine accepts on a type, for the CapabilityStatement. */
  capabilityIncludes(type: string): { include: string[]; revinclude: string[] };
  /** The parameters of a system search (no type), `_type` and `_has` among them, for the CapabilityStatement. */
  capabilitySystemSearchParams(): CapabilitySearchParam[];
}

/**
 * A request kept to run later (https://hl7.org/fhir/R4/async.html): its route of the table (router.ts)
 * and what the route's handler reads of it.
 */
export interface SavedCall {
  readonly route: string;
  readonly params: Readonly<Record<string, string | undefined>>;
  readonly query: string;
  /** The search parameters: the query's, and a POST _search form's. */
  readonly searchParams: readonly (readonly [string, string])[];
  /** The headers the handler reads (`Prefer` without respond-async). */
  readonly headers: Readonly<Partial<Record<CallHeader, string>>>;
}

/** Asynchronous requests (export/async-requests.ts): jobs run in the background, polled at a status URL. */
export interface AsyncRequests {
  /** Queues `call` for the caller; answers its status URL (absolute). 429 past the account's bound. */
  start(request: FhirRequest, call: SavedCall): Promise<string>;
}

/** Everything a FHIR interaction needs, built once per process by app.ts. */
export interface FhirServices {
  readonly config: Config;
  readonly store: ResourceStore;
  readonly types: ResourceTypes;
  readonly validate: (resource: unknown) => ValidationIssue[];
  /** The stored profiles (profiles/): what a resource's meta.profile, or $validate's `profile`, holds it to. */
  readonly profiles: ProfileChecker;
  /**
   * Validates, ahead of their writes and in parallel where it can (the importer: on worker threads and its
   * own), the resources a transaction rewrote (its references resolved), so that `validate` answers them
   * from those verdicts; the answer forgets the verdicts not used. Absent: `validate` does all the work.
   */
  readonly prevalidate?: (resources: readonly unknown[]) => Promise<() => void>;
  readonly search: SearchEngine;
  /** `${AMBIENT_PUBLIC_URL}/fhir`, the base of every absolute link. */
  readonly baseUrl: string;
  /** Which references name a resource of this server (the parser indexing and validation use). */
  readonly references: ReferenceParser;
  /** The route table's matcher (router.ts): Bundle entries find their interaction through it. */
  readonly router: FhirRouter;
  /** The key that signs the page cursors of every paged list (page-cursor.ts). */
  readonly cursorKey: CursorKey;
  /** Each account's last write position, kept only when searches may read from replicas (DATABASE_READ_URLS). */
  readonly writePositions?: WritePositions;
  /** `Prefer: respond-async` on searches; absent where no job runner serves them (the import command). */
  readonly asyncRequests?: AsyncRequests;
}

/** Conditional criteria searched ahead of a write transaction (SearchEngine.findIdsAhead). */
export interface MatchesAhead {
  /** The pks of the matches, at most `limit`. */
  readonly pks: readonly number[];
  readonly limit: number;
  /** The last resource_history seq the search's snapshot held (0: none). */
  readonly seq: number;
}

/**
 * Criteria searched ahead that the transaction cannot check cheaply: a resource that a chain or `_has`
 * of them passes through, or too many resources, changed since. They are searched ahead again.
 */
export class StaleMatchesError extends Error {
  constructor() {
    super('the data the conditional criteria depend on changed since they were searched');
  }
}

/** One request as the FHIR layer sees it: who asks, through which services. */
export interface FhirRequest {
  readonly services: FhirServices;
  readonly principal: Principal;
  /**
   * The time the request's searches may take together (AMBIENT_SEARCH_TIMEOUT_MS from the start of the
   * request: a batch's searches share it) and the signal that the client went away; each search makes
   * its own budget when absent.
   */
  readonly budget?: ReadBudget;
  /** In a transaction Bundle: the `Type/id` of the entries it writes (references to them need no read scope). */
  readonly bundleTargets?: ReadonlySet<string>;
  /**
   * Inside a transaction Bundle's write transaction: the types it has written so far. Criteria that a
   * chain or `_has` takes through one of them cannot be searched ahead (engine.ts findIdsSince).
   */
  readonly transactionWrites?: ReadonlySet<string>;
  /**
   * Conditional criteria searched ahead of the write transaction, by `Type?query`
   * (fhir/conditional.ts withMatchesAhead); undefined values where the database searches them inside it.
   */
  readonly matchesAhead?: ReadonlyMap<string, MatchesAhead | undefined>;
}
