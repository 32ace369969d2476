"""What the SQL around MATCH_RECOGNIZE may contain: the sandbox's allow-lists.

The sandbox (:mod:`dfs_cer.query.sandbox`) parses the outer query with sqlglot, in the dialect of
the engine that runs it (DuckDB or Spark SQL), and accepts it only if every node of the tree is
of a kind listed here (:data:`ALLOWED_NODES`, compared by exact class: a node kind a new sqlglot
release adds, or a subclass of a listed one, is refused until it is listed) and every function
it calls is listed by name (:data:`ALLOWED_FUNCTIONS`). Everything else — commands, Hive script
transforms (``SELECT TRANSFORM ... USING``), ``LATERAL VIEW``, hints, parameters, JVM and file
functions, session values — is refused by default.

The lists hold what an analyst needs around matches: arithmetic, comparisons, boolean logic,
CASE / IF / COALESCE, casts, string, date/time and math functions, aggregates (with FILTER and
WITHIN GROUP), window functions, joins between the registered relations, set operations, CTEs,
subqueries, GROUP BY (ROLLUP / CUBE / GROUPING SETS), HAVING, QUALIFY, ORDER BY, LIMIT, OFFSET.
"""

from __future__ import annotations

from sqlglot import exp

#: node kinds (sqlglot classes, exact) other than function calls
ALLOWED_NODES: frozenset[type[exp.Expr]] = frozenset({
    # a query and its clauses
    exp.Select, exp.Union, exp.Intersect, exp.Except, exp.From, exp.Join, exp.Where, exp.Group, exp.Having,
    exp.Qualify, exp.Order, exp.Ordered, exp.Limit, exp.LimitOptions, exp.Offset, exp.Fetch, exp.Distinct, exp.With, exp.CTE, exp.Subquery,
    exp.Table, exp.TableAlias, exp.Values, exp.Rollup, exp.Cube, exp.GroupingSets,
    # windows and aggregate modifiers
    exp.Window, exp.WindowSpec, exp.Filter, exp.WithinGroup, exp.IgnoreNulls, exp.RespectNulls,
    # names and values
    exp.Identifier, exp.Column, exp.Star, exp.Alias, exp.Literal, exp.Boolean, exp.Null, exp.Var, exp.DataType,
    exp.DataTypeParam, exp.Interval, exp.Tuple, exp.Paren, exp.Bracket, exp.Dot, exp.AtTimeZone,
    # operators
    exp.Neg, exp.Not, exp.And, exp.Or, exp.Add, exp.Sub, exp.Mul, exp.Div, exp.IntDiv, exp.Mod, exp.DPipe,
    exp.BitwiseAnd, exp.BitwiseOr, exp.BitwiseXor, exp.BitwiseNot, exp.BitwiseLeftShift, exp.BitwiseRightShift,
    exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.NullSafeEQ, exp.NullSafeNEQ, exp.Is, exp.In,
    exp.Between, exp.Like, exp.ILike, exp.SimilarTo, exp.Escape, exp.Any, exp.All,
})

#: functions, by the name sqlglot gives the call (its canonical name for the functions it knows,
#: the name as written, lower case, for the others), with the engines' spellings of them
ALLOWED_FUNCTIONS: frozenset[str] = frozenset({
    # expressions written as functions
    "cast", "try_cast", "case", "if", "coalesce", "nullif", "ifnull", "nvl", "exists", "extract", "greatest",
    "least", "iif", "convert", "boolean", "int", "double", "float", "string", "timestamp", "timestamp_ltz",
    "timestamp_ntz",
    # math
    "abs", "ceil", "ceiling", "floor", "round", "sqrt", "cbrt", "exp", "ln", "log", "log2", "log10", "power",
    "pow", "sign", "mod", "pi", "degrees", "radians", "sin", "cos", "tan", "asin", "acos", "atan", "atan2",
    "trunc", "truncate", "signum", "isnan", "is_nan", "isinf", "is_inf",
    # strings
    "upper", "lower", "length", "char_length", "substring", "substr", "trim", "ltrim", "rtrim", "concat",
    "concat_ws", "replace", "lpad", "rpad", "pad", "left", "right", "str_position", "strpos", "instr",
    "position", "locate", "starts_with", "startswith", "ends_with", "contains", "regexp_like", "regexp_matches",
    "regexp_extract", "regexp_replace", "split", "split_part", "initcap", "reverse", "repeat", "ascii", "chr", "md5",
    "char", "character_length", "len", "charindex", "endswith", "lcase", "ucase", "leftpad", "rightpad", "rlike",
    "string_split", "string_to_array", "str_split", "regexp_split", "split_by_string", "string_split_regex",
    "str_split_regex", "translate",
    # dates and times
    "current_date", "current_timestamp", "date_part", "date_trunc", "timestamp_trunc", "date_add", "date_sub", "date_diff",
    "datediff", "year", "month", "day", "dayofmonth", "dayofweek", "dayofyear", "hour", "minute", "second",
    "week", "weekofyear", "quarter", "epoch", "epoch_ms", "make_date", "make_timestamp", "to_timestamp",
    "to_date", "date", "unix_to_time", "time_to_unix", "str_to_time", "str_to_date", "time_to_str", "strftime",
    "strptime", "date_format", "last_day", "add_months",
    "day_of_month", "day_of_week", "day_of_year", "week_of_year", "date_from_parts", "timestamp_from_parts",
    "ts_or_ds_add", "ts_or_ds_to_date", "time_str_to_time", "today", "curdate", "datetrunc", "last_day_of_month",
    "from_utc_timestamp", "to_utc_timestamp", "datefromparts", "timestampfromparts", "dateadd", "timestampadd",
    "now", "dayname", "monthname", "isodow", "dayofweek_iso", "time_bucket", "date_bin", "epoch_us",
    # aggregates
    "count", "sum", "avg", "min", "max", "stddev", "stddev_pop", "stddev_samp", "variance", "variance_pop",
    "var_samp", "var_pop", "median", "quantile", "quantile_cont", "quantile_disc", "percentile_cont",
    "percentile_disc", "approx_distinct", "approx_count_distinct", "approx_quantile", "count_if", "any_value",
    "first", "last", "bool_and", "bool_or", "logical_and", "logical_or", "corr", "covar_pop", "covar_samp",
    "arg_max", "arg_min", "max_by", "min_by", "array_agg", "collect_list", "group_concat", "string_agg",
    "listagg", "mode", "product", "bit_and", "bit_or", "bit_xor", "every", "argmax", "argmin", "arrayagg", "list", "booland_agg", "boolor_agg", "countif", "stdev",
    "variance_samp",
    # window functions
    "row_number", "rank", "dense_rank", "percent_rank", "cume_dist", "ntile", "lag", "lead", "first_value",
    "last_value", "nth_value",
    # arrays
    "array", "struct", "struct_pack", "named_struct", "array_size", "array_length", "size", "cardinality", "array_contains", "array_has", "list_contains", "list_has",
    "list_value",
    # function spellings of listed operators (``like(s, 'a%')``, Spark's ``element_at(a, 1)``)
    "like", "ilike", "and", "or", "xor", "div", "element_at", "try_element_at", "shiftleft", "shiftright",
    # sqlglot's own names for some of the above (a spelling no engine has fails
    # there, harmlessly)
    "date_to_date_str", "time_to_time_str", "ts_or_ds_to_date_str",
})

#: names Spark SQL resolves to a session value when no column of the relation has them
#: (``SELECT current_catalog FROM m``): a column spelled so must be qualified with its relation
SESSION_NAMES: frozenset[str] = frozenset({
    "current_catalog", "current_database", "current_schema", "current_schemas", "current_user", "current_role",
    "current_path", "current_query", "user", "session_user", "system_user",
})
