export { buildOpenApiDocument, deriveErrors, API_DOCUMENT_VERSION, API_TITLE, OPENAPI_VERSION } from './build';
export type { BuildOptions } from './build';
export { ERROR_CODES, LIMIT_CLASS_INFO, PERMISSION_GRANTS } from './reference';
export type { ErrorCodeInfo } from './reference';
