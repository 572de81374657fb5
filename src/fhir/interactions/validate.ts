// https://hl7.org/fhir/R4/resource-operation-validate.html ($validate on a type or an instance)
import { AppError } from '../../errors.js';
import { requireAccess } from '../access.js';
import { assertValidId } from '../ids.js';
import type { FhirResponse } from '../response.js';
import type { FhirRequest } from '../services.js';

interface ParametersLike {
  resourceType: 'Parameters';
  parameter?: { name?: string; resource?: unknown; valueCode?: string; valueUri?: unknown; valueCanonical?: unknown }[];
}

/**
 * The resource to check: the body itself, or the `resource` parameter of a Parameters body, with its
 * `mode` and `profile` parameters.
 */
function resourceToValidate(body: unknown, type: string): { resource: unknown; mode?: string; profiles: string[] } {
  if (
    body &&
    typeof body === 'object' &&
    (body as { resourceType?: unknown }).resourceType === 'Parameters' &&
    type !== 'Parameters'
  ) {
    const parameters = (body as ParametersLike).parameter ?? [];
    // Client JSON: refuse what is not a list of parameter objects before looking into it.
    if (!Array.isArray(parameters)) {
      throw new AppError('bad-request', 'Parameters.parameter must be an array of parameters', {
        expression: 'Parameters.parameter',
      });
    }
    parameters.forEach((p, i) => {
      if (!p || typeof p !== 'object' || Array.isArray(p)) {
        throw new AppError('bad-request', `Parameters.parameter[${i}] must be an object with a name`, {
          expression: `Parameters.parameter[${i}]`,
        });
      }
    });
    const mode = parameters.find((p) => p.name === 'mode')?.valueCode;
    const resource = parameters.find((p) => p.name === 'resource')?.resource;
    const profiles = parameters
      .filter((p) => p.name === 'profile')
      .map((p, i) => {
        const value = p.valueCanonical ?? p.valueUri;
        if (typeof value !== 'string') {
          throw new AppError('bad-request', `The profile parameter (${i + 1}) must be a valueCanonical or valueUri`);
        }
        return value;
      });
    return { resource, mode, profiles };
  }
  return { resource: body, profiles: [] };
}

/** Validates without storing anything: 200 with an OperationOutcome listing every issue (or "all OK"). */
export async function validateInteraction(
  request: FhirRequest,
  type: string,
  body: unknown,
  id?: string,
  queryProfiles: readonly string[] = [],
): Promise<FhirResponse> {
  requireAccess(request, 'read', type);
  if (id !== undefined) assertValidId(id);
  const { resource, mode, profiles } = resourceToValidate(body, type);
  if (mode === 'delete') {
    if (id === undefined)
      throw new AppError(
        'bad-request',
        '$validate with mode=delete needs an instance: POST /fhir/{type}/{id}/$validate',
      );
    const current = await request.services.store.read(type, id);
    const exists = current !== undefined && !current.deleted;
    return outcome(
      exists
        ? []
        : [{ severity: 'error', code: 'not-found', diagnostics: `${type}/${id} does not exist`, expression: [type] }],
    );
  }
  if (!resource || typeof resource !== 'object' || Array.isArray(resource)) {
    throw new AppError(
      'invalid-json',
      'Send the resource to validate as the body, or as the "resource" parameter of a Parameters body',
    );
  }
  const actualType = (resource as { resourceType?: unknown }).resourceType;
  if (actualType !== type) {
    throw new AppError(
      'resource-type-mismatch',
      `The resource's type (${JSON.stringify(actualType ?? null)}) is not ${type}`,
    );
  }
  const baseIssues = request.services.validate(resource);
  // The profiles once the resource is valid R4: their checks take its shape for granted.
  const profileIssues = baseIssues.some((issue) => issue.severity === 'error')
    ? []
    : await request.services.profiles.check(request, resource as Record<string, unknown>, {
        explicit: [...queryProfiles, ...profiles],
        reportUnknown: true,
      });
  const issues = [...baseIssues, ...profileIssues].map((issue) => ({
    severity: issue.severity,
    code: issue.code,
    diagnostics: issue.diagnostics,
    expression: [issue.expression],
  }));
  if (id !== undefined && (resource as { id?: unknown }).id !== undefined && (resource as { id?: unknown }).id !== id) {
    issues.push({
      severity: 'error',
      code: 'invalid',
      diagnostics: `The resource's id differs from ${id}`,
      expression: [`${type}.id`],
    });
  }
  return outcome(issues);
}

function outcome(
  issues: { severity: string; code: string; diagnostics: string; expression: string[] }[],
): FhirResponse {
  return {
    status: 200,
    body: {
      resourceType: 'OperationOutcome',
      issue:
        issues.length > 0
          ? issues
          : [{ severity: 'information', code: 'informational', diagnostics: 'No issues: the resource is valid' }],
    },
  };
}
