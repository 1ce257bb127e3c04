import { counter, CountedTimer, gauge, histogram } from './metrics';

/** The bus's Prometheus series; `subject` is the subject without a test prefix. */
const series = {
  handled: counter('fleet_bus_handled_total', 'Requests this service handled, by subject and outcome (ok, or the error code answered).', ['subject', 'outcome']),
  handleSeconds: histogram('fleet_bus_handler_duration_seconds', 'From a request arriving to its reply being sent, by subject.', ['subject']),
  requested: counter('fleet_bus_requests_total', 'Requests this process sent, by subject and outcome (ok, the error code answered, or unavailable: no reply in time, no responder or an open circuit).', ['subject', 'outcome']),
  requestSeconds: histogram('fleet_bus_request_duration_seconds', 'From sending a request to its reply (or giving up), by subject.', ['subject']),
  circuit: gauge('fleet_bus_circuit_state', "State of the circuit breaker of a subject this process calls: 0 closed, 0.5 half-open (one trial request), 1 open (requests fail at once).", ['subject']),
};

export const busMetrics = {
  circuit: series.circuit,
  handled: new CountedTimer(series.handled, series.handleSeconds),
  requested: new CountedTimer(series.requested, series.requestSeconds),
};
