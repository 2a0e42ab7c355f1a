"""SparkSource ``mode=jdbc`` without a database: settings, SQL, drivers, table ownership."""

from __future__ import annotations

import pytest

from eos.api import ConfigError, ExactlyOnceSupport
from services.connectors.spark import SparkSource
from services.connectors.spark.config import CONFIG_DEF, SparkSourceSettings, problems
from services.connectors.spark.jdbc_database import ColumnInfo, Table
from services.connectors.spark.jdbc_drivers import (
    driver_class,
    driver_settings,
    missing_driver,
    packages,
    redact_url,
    spark_url,
)
from services.connectors.spark.jdbc_mode import owned, owner_of, topic_of
from services.connectors.spark.jdbc_read import custom_schema, offset_of, positions
from services.connectors.spark.jdbc_settings import JdbcSettings
from services.connectors.spark.jdbc_sql import (
    BadValue,
    CursorColumn,
    after,
    boundaries,
    delay_limit,
    literal,
    now_expression,
    probe_sql,
    quote,
    stripes,
)

BASE = {
    "mode": "jdbc",
    "connection.url": "jdbc:postgresql://db:5432/shop",
    "connection.user": "reader",
    "connection.password": "s3cret",
    "jdbc.mode": "timestamp+incrementing",
    "timestamp.column.name": "updated_at",
    "topic.prefix": "shop-",
}
TS = CursorColumn("updated_at", "timestamp", '"updated_at"')
ID = CursorColumn("id", "integer", '"id"')


def test_settings_parse_and_hide_the_password() -> None:
    jdbc = JdbcSettings.parse(BASE)
    assert (jdbc.mode, jdbc.timestamp_column, jdbc.topic_prefix) == (
        "timestamp+incrementing",
        "updated_at",
        "shop-",
    )
    assert "s3cret" not in repr(jdbc)
    assert CONFIG_DEF.keys["connection.password"].type.name == "PASSWORD"
    assert SparkSourceSettings.parse(BASE).mode == "jdbc"


@pytest.mark.parametrize(
    ("change", "key", "fragment"),
    [
        ({"connection.url": ""}, "connection.url", "is missing"),
        ({"connection.url": "postgresql://db/shop"}, "connection.url", "starts with jdbc:"),
        ({"jdbc.mode": ""}, "jdbc.mode", "is missing"),
        ({"timestamp.column.name": ""}, "timestamp.column.name", "is missing"),
        ({"topic.prefix": ""}, "topic", "topic.prefix"),
        ({"table.whitelist": "a", "table.blacklist": "b"}, "table.blacklist", "not both"),
        ({"query": "SELECT 1", "table.whitelist": "a"}, "query", "not both"),
        ({"jdbc.mode": "bulk", "query": "SELECT 1"}, "key.columns", "key order"),
    ],
)
def test_problems_name_the_setting(change: dict[str, str], key: str, fragment: str) -> None:
    found = problems({**BASE, **change})
    assert fragment in " ".join(found[key])
    with pytest.raises(ConfigError) as error:
        SparkSourceSettings.parse({**BASE, **change})
    assert error.value.key == key
    assert "s3cret" not in str(error.value)


def test_an_unknown_jdbc_mode_is_refused() -> None:
    assert "must be one of" in CONFIG_DEF.validate({**BASE, "jdbc.mode": "cdc"})["jdbc.mode"][0]


def test_literals_are_rebuilt_from_values_never_copied() -> None:
    assert literal(42, "integer") == "42"
    assert literal("42", "integer") == "42"
    assert literal("2024-02-29T12:00:00.5", "timestamp") == "'2024-02-29 12:00:00.500000'"
    assert (
        literal("2024-02-29T12:00:00.123456+02:00", "timestamptz")
        == "'2024-02-29 10:00:00.123456+00:00'"
    )
    assert literal("2024-02-29 12:00:00.1234567+00", "timestamptz") == (
        "'2024-02-29 12:00:00.123456+00:00'"
    )
    for bad, kind in [
        ("1; DROP TABLE x", "integer"),
        (1.5, "integer"),
        (True, "integer"),
        ("2024-02-29' OR '1'='1", "timestamp"),
        ("2024-02-29T12:00:00", "timestamptz"),
    ]:
        with pytest.raises(BadValue):
            literal(bad, kind)


def test_after_a_position_is_lexicographic() -> None:
    assert after([TS, ID], None) == '"updated_at" IS NOT NULL AND "id" IS NOT NULL'
    assert after([ID], [7]) == '"id" > 7'
    assert after([TS, ID], ["2024-01-01T00:00:00", 7]) == (
        "\"updated_at\" >= '2024-01-01 00:00:00.000000' AND "
        '("updated_at" > \'2024-01-01 00:00:00.000000\' OR "id" > 7)'
    )


def test_partitions_of_a_read_cover_every_value_once_in_order() -> None:
    points = boundaries("integer", "1", "100", 4)
    assert points == ["26", "51", "76"]
    assert stripes(ID, points) == [
        '"id" < 26',
        '"id" >= 26 AND "id" < 51',
        '"id" >= 51 AND "id" < 76',
        '"id" >= 76',
    ]
    assert boundaries("integer", "5", "6", 8) == ["6"]
    assert boundaries("integer", "5", "5", 8) == []
    assert stripes(ID, []) == [""]
    moments = boundaries("timestamp", "2024-01-01 00:00:00", "2024-01-01 00:00:04", 2)
    assert moments == ["'2024-01-01 00:00:02.000000'"]
    assert boundaries("timestamp", "2024-01-01 00:00:00", "not a time", 2) == []


def test_probe_and_the_delay_bound() -> None:
    assert probe_sql('"s"."t"', TS, '"id" > 3', "LOCALTIMESTAMP") == (
        'SELECT COUNT(*), MIN("updated_at"), MAX("updated_at"), LOCALTIMESTAMP '
        'FROM "s"."t" WHERE "id" > 3'
    )
    assert delay_limit("2024-01-01 00:00:05.5", 2500, "timestamp") == (
        "'2024-01-01 00:00:03.000000'"
    )
    assert delay_limit("2024-01-01 02:00:00+02", 0, "timestamptz") == (
        "'2024-01-01 00:00:00.000000+00:00'"
    )
    assert now_expression("PostgreSQL", "timestamp") == "LOCALTIMESTAMP"
    assert now_expression("MariaDB", "timestamp") == "LOCALTIMESTAMP(6)"
    assert now_expression("Microsoft SQL Server", "timestamptz") == "SYSDATETIMEOFFSET()"


def test_offsets_follow_connects_names() -> None:
    assert offset_of("timestamp+incrementing", ["2024-01-01T00:00:00.000000", "9"]) == {
        "timestamp": "2024-01-01T00:00:00.000000",
        "incrementing": 9,
    }
    assert positions("incrementing", {"incrementing": 9}) == [9]
    assert positions("timestamp", None) is None


def test_numbers_without_precision_and_times_are_read_as_text() -> None:
    columns = [
        ColumnInfo("a", 2, "numeric", 0, 0),
        ColumnInfo("b", 2, "numeric", 12, 3),
        ColumnInfo("c", 92, "time", 8, 0),
        ColumnInfo("d`x", 3, "decimal", 65, 30),
        ColumnInfo("e", 4, "int4", 10, 0),
    ]
    assert custom_schema(columns) == "`a` STRING, `c` STRING, `d``x` STRING"


def test_table_ownership_by_whitelist_or_hash() -> None:
    tables = [Table("public", f"t{n}") for n in range(12)] + [Table("sales", "t1")]
    jdbc = JdbcSettings.parse(BASE)
    spread = [owned(tables, jdbc, i, 3) for i in range(3)]
    assert sorted(t.qualified for part in spread for t in part) == sorted(
        t.qualified for t in tables
    )
    assert [t.qualified for t in spread[owner_of("public.t5", 3)] if t.name == "t5"] == [
        "public.t5"
    ]
    listed = JdbcSettings.parse({**BASE, "table.whitelist": "t1,public.t2,t3"})
    mine = [[t.qualified for t in owned(tables, listed, i, 2)] for i in range(2)]
    assert mine == [["public.t1", "public.t3", "sales.t1"], ["public.t2"]]
    unlisted = JdbcSettings.parse({**BASE, "table.blacklist": "t1,public.t2"})
    everything = [t.qualified for i in range(2) for t in owned(tables, unlisted, i, 2)]
    assert sorted(everything) == sorted(t.qualified for t in [*tables[3:12], tables[0]])


def test_topics_and_quoting() -> None:
    settings = SparkSourceSettings.parse(BASE)
    jdbc = JdbcSettings.parse(BASE)
    assert topic_of(settings, jdbc, Table("public", "orders")) == "shop-orders"
    assert topic_of(settings, jdbc, None) == "shop-"
    one = SparkSourceSettings.parse({**BASE, "topic": "all"})
    assert topic_of(one, jdbc, Table("public", "orders")) == "all"
    assert quote(["public", 'we"ird'], '"') == '"public"."we""ird"'
    assert Table("public", "o").sql("`") == "`public`.`o`"


async def test_connector_spreads_tables_or_runs_one_task_for_a_query() -> None:
    connector = SparkSource()
    await connector.start({**BASE, "table.whitelist": "a,b"})
    assert [c["task.index"] for c in connector.task_configs(5)] == ["0", "1"]
    await connector.start(BASE)
    assert [c["task.count"] for c in connector.task_configs(3)] == ["3", "3", "3"]
    await connector.start({**BASE, "query": "SELECT * FROM v"})
    assert len(connector.task_configs(3)) == 1
    assert connector.exactly_once_support(BASE) is ExactlyOnceSupport.SUPPORTED


def test_drivers_by_name_version_or_coordinates() -> None:
    assert packages("postgresql, mariadb:3.4.0,com.example:drv:1.2") == [
        "org.postgresql:postgresql:42.7.14",
        "org.mariadb.jdbc:mariadb-java-client:3.4.0",
        "com.example:drv:1.2",
    ]
    with pytest.raises(ValueError, match="unknown driver 'oracle'"):
        packages("oracle")
    conf = driver_settings(
        {"spark.jdbc.drivers": "postgresql", "spark.jars.packages": "a:b:1"},
        {"EOS_CACHE_DIR": "/c"},
    )
    assert conf == {
        "spark.jars.packages": "a:b:1,org.postgresql:postgresql:42.7.14",
        "spark.jars.ivy": "/c/ivy",
    }
    assert driver_class("jdbc:mariadb://h/db") == "org.mariadb.jdbc.Driver"
    assert spark_url("jdbc:mariadb://h/db") == "jdbc:mysql://h/db?permitMysqlScheme"
    assert spark_url("jdbc:mariadb://h/db?a=b") == "jdbc:mysql://h/db?a=b&permitMysqlScheme"
    assert spark_url("jdbc:postgresql://h/db") == "jdbc:postgresql://h/db"
    assert driver_class("jdbc:oracle:thin:@h") is None
    assert "spark.jdbc.drivers=sqlserver" in missing_driver("jdbc:sqlserver://h;password=x")
    assert "password=x" not in missing_driver("jdbc:sqlserver://h;password=x")


def test_urls_lose_their_secrets() -> None:
    assert redact_url("jdbc:postgresql://h/db?user=a&password=p&ssl=true") == (
        "jdbc:postgresql://h/db?user=a&password=***&ssl=true"
    )
    assert redact_url("jdbc:mysql://u:p@h/db") == "jdbc:mysql://u:***@h/db"
    assert redact_url("jdbc:sqlserver://h;databaseName=d;password=p") == (
        "jdbc:sqlserver://h;databaseName=d;password=***"
    )
