-- Part 2 of the proxy: people (sessions, the console, operators) and usage
-- metering. New functions follow the discipline of 0002: validate, write,
-- append the audit row through record_operation (which announces the
-- cluster on queen_proxy_inval), pinned search_path, qualified names.
--
-- A new payload on queen_proxy_inval: "user:<id>" (a user's operator flag,
-- name or password changed), so that every proxy drops what it cached about
-- that user at once.

-- Usage batches already added to usage_minutes, by the id the proxy gave the
-- batch. A batch whose commit the proxy could not confirm is spooled and
-- replayed; its id makes the replay a no-op when the first try did commit,
-- so usage is counted exactly once.
CREATE TABLE queen_proxy.usage_batches (
    id         uuid PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX usage_batches_applied ON queen_proxy.usage_batches (applied_at);

-- Monthly quota crossings, one per cluster, UTC month and kind: the outbox
-- event of each is emitted once, whichever proxy sees the crossing first.
-- A block is lifted (lifted_at) when the month ends or the quota no longer
-- applies.
CREATE TABLE queen_proxy.quota_marks (
    cluster_id uuid NOT NULL REFERENCES queen_proxy.clusters (id) ON DELETE CASCADE,
    month      date NOT NULL CHECK (month = date_trunc('month', month)::date),
    kind       text NOT NULL CHECK (kind IN ('warning', 'blocked')),
    at         timestamptz NOT NULL DEFAULT now(),
    lifted_at  timestamptz,
    PRIMARY KEY (cluster_id, month, kind)
);

-- The first UTC day whose usage minutes are kept: prune_usage_minutes
-- removes whole days before it, and apply_usage_batch refuses minutes before
-- it, so every day left in usage_minutes is complete and rollup_usage_days
-- may recompute it.
CREATE FUNCTION queen_proxy.usage_horizon(p_keep_days integer) RETURNS date
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, pg_temp
AS $$
    SELECT (now() AT TIME ZONE 'UTC')::date - greatest(p_keep_days, 1);
$$;

-- Restated from 0002: whole UTC days only, rolled up before they go, and
-- the batch ids of the same age with them.
CREATE OR REPLACE FUNCTION queen_proxy.prune_usage_minutes(p_keep_days integer) RETURNS integer
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_horizon date := queen_proxy.usage_horizon(p_keep_days);
    v_gone integer;
BEGIN
    PERFORM queen_proxy.rollup_usage_days(v_horizon);
    DELETE FROM queen_proxy.usage_minutes WHERE minute < (v_horizon::timestamp AT TIME ZONE 'UTC');
    GET DIAGNOSTICS v_gone = ROW_COUNT;
    DELETE FROM queen_proxy.usage_batches WHERE applied_at < (v_horizon::timestamp AT TIME ZONE 'UTC');
    RETURN v_gone;
END;
$$;

-- Adds one batch of per-minute counters (parallel arrays, one element per
-- cluster, minute and class) to usage_minutes, once: false when the batch
-- id was applied before. Rows of clusters that no longer exist, and minutes
-- before the retention horizon, are dropped.
CREATE FUNCTION queen_proxy.apply_usage_batch(
    p_batch uuid, p_keep_days integer, p_clusters uuid[], p_minutes timestamptz[], p_classes text[],
    p_msgs bigint[], p_reqs bigint[], p_bytes_in bigint[], p_bytes_out bigint[]
) RETURNS boolean
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    INSERT INTO queen_proxy.usage_batches (id) VALUES (p_batch) ON CONFLICT (id) DO NOTHING;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    INSERT INTO queen_proxy.usage_minutes AS m (cluster_id, minute, op_class, msgs, reqs, bytes_in, bytes_out)
    SELECT u.cluster_id, date_trunc('minute', u.minute), u.op_class,
           sum(u.msgs), sum(u.reqs), sum(u.bytes_in), sum(u.bytes_out)
    FROM unnest(p_clusters, p_minutes, p_classes, p_msgs, p_reqs, p_bytes_in, p_bytes_out)
         AS u(cluster_id, minute, op_class, msgs, reqs, bytes_in, bytes_out)
    WHERE EXISTS (SELECT 1 FROM queen_proxy.clusters c WHERE c.id = u.cluster_id)
      AND u.minute >= (queen_proxy.usage_horizon(p_keep_days)::timestamp AT TIME ZONE 'UTC')
    GROUP BY 1, 2, 3
    ON CONFLICT (cluster_id, minute, op_class) DO UPDATE SET
        msgs = m.msgs + excluded.msgs, reqs = m.reqs + excluded.reqs,
        bytes_in = m.bytes_in + excluded.bytes_in, bytes_out = m.bytes_out + excluded.bytes_out;
    RETURN true;
END;
$$;

-- A cluster's monthly message quota: its override when it sets one (JSON
-- null: unlimited), else its plan's. NULL is unlimited.
CREATE FUNCTION queen_proxy.cluster_monthly_quota(p_cluster uuid) RETURNS bigint
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE
        WHEN NOT c.limit_overrides ? 'monthly_msgs_quota' THEN p.monthly_msgs_quota
        WHEN jsonb_typeof(c.limit_overrides -> 'monthly_msgs_quota') = 'null' THEN NULL
        WHEN jsonb_typeof(c.limit_overrides -> 'monthly_msgs_quota') = 'number'
             AND (c.limit_overrides ->> 'monthly_msgs_quota')::numeric > 0
             AND (c.limit_overrides ->> 'monthly_msgs_quota')::numeric = trunc((c.limit_overrides ->> 'monthly_msgs_quota')::numeric)
            THEN (c.limit_overrides ->> 'monthly_msgs_quota')::numeric::bigint
        ELSE p.monthly_msgs_quota
    END
    FROM queen_proxy.clusters c JOIN queen_proxy.plans p ON p.id = c.plan_id
    WHERE c.id = p_cluster;
$$;

-- Checks the monthly quota of the given clusters, and of every cluster
-- whose block is still on: a warning at p_warn_percent emits
-- cluster_monthly_quota_warning, reaching the quota emits
-- cluster_monthly_quota_blocked and sets an active cluster push_blocked
-- (actor system); a block is lifted, and the cluster set active again if it
-- is still push_blocked, once the month is over or the quota no longer
-- applies. Each event is emitted once per cluster and month. Returns the
-- number of clusters whose status changed.
CREATE FUNCTION queen_proxy.check_monthly_quotas(p_clusters uuid[], p_warn_percent integer) RETURNS integer
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_month date := date_trunc('month', now() AT TIME ZONE 'UTC')::date;
    v_cluster uuid;
    v_tenant uuid;
    v_status text;
    v_quota bigint;
    v_used bigint;
    v_changed integer := 0;
    v_event jsonb;
BEGIN
    FOR v_cluster IN
        SELECT id FROM queen_proxy.clusters WHERE id = ANY (coalesce(p_clusters, '{}'))
        UNION
        SELECT cluster_id FROM queen_proxy.quota_marks WHERE kind = 'blocked' AND lifted_at IS NULL
        ORDER BY 1
    LOOP
        -- One checker per cluster at a time, whichever proxy runs it.
        SELECT tenant_id, status INTO v_tenant, v_status FROM queen_proxy.clusters WHERE id = v_cluster FOR UPDATE;
        CONTINUE WHEN v_tenant IS NULL;
        v_quota := queen_proxy.cluster_monthly_quota(v_cluster);
        v_used := queen_proxy.cluster_month_msgs(v_cluster, v_month);
        v_event := jsonb_build_object('cluster_id', v_cluster, 'tenant_id', v_tenant, 'month', v_month,
            'msgs', v_used, 'quota', v_quota);

        UPDATE queen_proxy.quota_marks SET lifted_at = now()
        WHERE cluster_id = v_cluster AND kind = 'blocked' AND lifted_at IS NULL
          AND (month < v_month OR v_quota IS NULL OR v_used < v_quota);
        IF FOUND AND v_status = 'push_blocked' THEN
            UPDATE queen_proxy.clusters SET status = 'active' WHERE id = v_cluster;
            PERFORM queen_proxy.record_operation(v_tenant, v_cluster, 'system', NULL, 'cluster_status_changed',
                v_cluster::text, jsonb_build_object('status', 'active', 'previous', v_status, 'reason', 'monthly_quota_lifted'));
            v_status := 'active';
            v_changed := v_changed + 1;
        END IF;
        CONTINUE WHEN v_quota IS NULL;

        IF v_used::numeric * 100 >= v_quota::numeric * p_warn_percent THEN
            INSERT INTO queen_proxy.quota_marks (cluster_id, month, kind) VALUES (v_cluster, v_month, 'warning')
            ON CONFLICT DO NOTHING;
            IF FOUND THEN
                PERFORM queen_proxy.emit_outbox('cluster_monthly_quota_warning',
                    v_event || jsonb_build_object('warn_percent', p_warn_percent));
            END IF;
        END IF;
        IF v_used >= v_quota THEN
            INSERT INTO queen_proxy.quota_marks AS q (cluster_id, month, kind) VALUES (v_cluster, v_month, 'blocked')
            ON CONFLICT (cluster_id, month, kind) DO UPDATE SET lifted_at = NULL, at = now()
                WHERE q.lifted_at IS NOT NULL;
            IF FOUND THEN
                PERFORM queen_proxy.emit_outbox('cluster_monthly_quota_blocked', v_event);
                IF v_status = 'active' THEN
                    UPDATE queen_proxy.clusters SET status = 'push_blocked' WHERE id = v_cluster;
                    PERFORM queen_proxy.record_operation(v_tenant, v_cluster, 'system', NULL, 'cluster_status_changed',
                        v_cluster::text, jsonb_build_object('status', 'push_blocked', 'previous', v_status,
                            'reason', 'monthly_quota'));
                    v_changed := v_changed + 1;
                END IF;
            END IF;
        END IF;
    END LOOP;
    RETURN v_changed;
END;
$$;

-- Restated from 0002: also announces "user:<id>", so that every proxy
-- drops the cached operator flag at once rather than after its 30 s.
CREATE OR REPLACE FUNCTION queen_proxy.set_operator(p_email text, p_enabled boolean) RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_user uuid;
    v_tenant uuid;
    v_was boolean;
BEGIN
    SELECT id, tenant_id, is_operator INTO v_user, v_tenant, v_was
    FROM queen_proxy.users WHERE email = lower(btrim(p_email)) FOR UPDATE;
    IF v_user IS NULL THEN
        RAISE EXCEPTION 'set_operator: no user %', p_email USING ERRCODE = 'no_data_found';
    END IF;
    UPDATE queen_proxy.users SET is_operator = p_enabled WHERE id = v_user;
    PERFORM queen_proxy.record_operation(v_tenant, NULL, 'control_plane', NULL,
        CASE WHEN p_enabled THEN 'operator_granted' ELSE 'operator_revoked' END, v_user::text,
        jsonb_build_object('changed', v_was IS DISTINCT FROM p_enabled));
    PERFORM pg_notify('queen_proxy_inval', 'user:' || v_user::text);
END;
$$;

-- The display name; NULL or blank clears it. Names are personal data: the
-- audit row says that it changed, not what to.
CREATE FUNCTION queen_proxy.set_user_name(p_user uuid, p_name text) RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_tenant uuid;
BEGIN
    UPDATE queen_proxy.users SET name = nullif(btrim(p_name), '') WHERE id = p_user RETURNING tenant_id INTO v_tenant;
    IF v_tenant IS NULL THEN
        RAISE EXCEPTION 'set_user_name: no user %', p_user USING ERRCODE = 'no_data_found';
    END IF;
    PERFORM queen_proxy.record_operation(v_tenant, NULL, 'control_plane', NULL, 'user_renamed', p_user::text, '{}');
    PERFORM pg_notify('queen_proxy_inval', 'user:' || p_user::text);
END;
$$;

-- A new bcrypt hash (NULL: no password login).
CREATE FUNCTION queen_proxy.set_user_password(p_user uuid, p_password_hash text) RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_tenant uuid;
BEGIN
    UPDATE queen_proxy.users SET password_hash = p_password_hash WHERE id = p_user RETURNING tenant_id INTO v_tenant;
    IF v_tenant IS NULL THEN
        RAISE EXCEPTION 'set_user_password: no user %', p_user USING ERRCODE = 'no_data_found';
    END IF;
    PERFORM queen_proxy.record_operation(v_tenant, NULL, 'control_plane', NULL, 'user_password_set', p_user::text,
        jsonb_build_object('cleared', p_password_hash IS NULL));
    PERFORM pg_notify('queen_proxy_inval', 'user:' || p_user::text);
END;
$$;
