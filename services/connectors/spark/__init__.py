"""SparkSource (``connector.class=SparkSource``): exactly-once from files and tables via PySpark.

Modules: :mod:`.connector` (the connector), :mod:`.task` (its task),
:mod:`.config` (settings), :mod:`.session` (the per-worker Spark session),
:mod:`.files_mode` / :mod:`.table_mode` (reading and offsets), :mod:`.mapping`
(rows → records), :mod:`.arrow_stream` (partition-at-a-time Arrow transfer),
:mod:`.sample` (the sample dataset of ``make run``).

Importing this package (what loading the ``SparkSource`` plugin does, e.g. to read its
``worker_settings`` at worker start-up) does not import PySpark: :mod:`.task` and the
modules behind it are imported when the first task is created.
"""

from services.connectors.spark.connector import SparkSource as SparkSource
from services.connectors.spark.sample import generate_sample_dataset as generate_sample_dataset
from services.connectors.spark.session import SparkUnavailable as SparkUnavailable
