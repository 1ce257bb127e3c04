import type { IncomingMessage } from 'node:http';
import type { HttpMethod, RouteDef } from '../routes/types';

export interface RouteMatch {
  route: RouteDef;
  params: Record<string, string>;
}

/** `allow` lists the methods the path takes, HEAD wherever GET is (a GET route answers HEAD too). */
export type MatchResult = { kind: 'found'; match: RouteMatch } | { kind: 'wrong_method'; allow: string[] } | { kind: 'none' };

interface CompiledPath {
  pattern: RegExp;
  names: string[];
  byMethod: Map<HttpMethod, RouteDef>;
}

/** Matches a request path against the route table; tells a wrong method (405) from no route (404). */
export class RouteMatcher {
  private readonly paths: CompiledPath[] = [];
  /** Each request's match, made once: the body reader, the pipeline and an early refusal all ask. */
  private readonly matched = new WeakMap<IncomingMessage, MatchResult>();

  constructor(routes: readonly RouteDef[]) {
    const byPath = new Map<string, CompiledPath>();
    for (const route of routes) {
      let compiled = byPath.get(route.path);
      if (!compiled) {
        const names: string[] = [];
        const source = route.path
          .split('/')
          .map((segment) => {
            const param = /^\{([a-z_]+)\}$/.exec(segment);
            if (!param) return segment.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
            names.push(param[1] as string);
            return '([^/]+)';
          })
          .join('/');
        compiled = { pattern: new RegExp(`^${source}/?$`), names, byMethod: new Map() };
        byPath.set(route.path, compiled);
        this.paths.push(compiled);
      }
      if (compiled.byMethod.has(route.method)) throw new Error(`duplicate route ${route.method} ${route.path}`);
      compiled.byMethod.set(route.method, route);
    }
  }

  /**
   * The match of a request's method and path (express's `req.path`: the URL's path as sent,
   * before its query string), made on first asking and kept for the request's life.
   */
  matchRequest(req: IncomingMessage & { path: string; method: string }): MatchResult {
    let found = this.matched.get(req);
    if (!found) {
      found = this.match(req.method, req.path);
      this.matched.set(req, found);
    }
    return found;
  }

  match(method: string, path: string): MatchResult {
    const allow = new Set<HttpMethod>();
    for (const compiled of this.paths) {
      const found = compiled.pattern.exec(path);
      if (!found) continue;
      const params: Record<string, string> = {};
      let decodable = true;
      compiled.names.forEach((name, i) => {
        try {
          params[name] = decodeURIComponent(found[i + 1] as string);
        } catch {
          decodable = false;
        }
      });
      if (!decodable) continue;
      const wanted = method === 'HEAD' ? 'GET' : method;
      const route = compiled.byMethod.get(wanted as HttpMethod);
      if (route) return { kind: 'found', match: { route, params } };
      for (const m of compiled.byMethod.keys()) allow.add(m);
    }
    if (allow.size === 0) return { kind: 'none' };
    const methods: string[] = [...allow];
    if (allow.has('GET')) methods.push('HEAD');
    return { kind: 'wrong_method', allow: methods.sort() };
  }
}
