"""Prometheus metrics for eos: the runtime's observer port implemented with
prometheus-client on one registry per worker, and the ``/metrics`` exposition.

::

    observer = PrometheusObserver()              # its own CollectorRegistry
    worker = Worker(..., observer=observer)      # the runtime reports into it
    body, content_type = metrics_response(observer.registry, request.headers.get("accept"))

docs/monitoring.md lists every metric.
"""

from metrics.definitions import TaskMetrics as TaskMetrics
from metrics.definitions import WorkerMetrics as WorkerMetrics
from metrics.exporter import OPENMETRICS_CONTENT_TYPE as OPENMETRICS_CONTENT_TYPE
from metrics.exporter import TEXT_CONTENT_TYPE as TEXT_CONTENT_TYPE
from metrics.exporter import metrics_response as metrics_response
from metrics.exporter import wants_openmetrics as wants_openmetrics
from metrics.observer import PrometheusObserver as PrometheusObserver
from metrics.observer import PrometheusTaskObserver as PrometheusTaskObserver
