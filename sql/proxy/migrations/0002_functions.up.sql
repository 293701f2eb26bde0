-- The control plane: operators run these functions from psql (docs/proxy.md).
-- Each validates, writes, then appends its audit row through
-- record_operation, which also announces the change on the channel
-- queen_proxy_inval so that every proxy process drops what it cached.
--
-- Payloads on queen_proxy_inval: a cluster id (the cluster, its keys or its
-- plan changed), or "session:<jti>" (a session was revoked).
--
-- Every function pins search_path and qualifies every name, so a role's own
-- search_path cannot redirect a call.

CREATE FUNCTION queen_proxy.record_operation(
    p_tenant uuid, p_cluster uuid, p_actor text, p_actor_id uuid,
    p_action text, p_target text, p_meta jsonb DEFAULT '{}'
) RETURNS bigint
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_id bigint;
BEGIN
    IF p_tenant IS NULL THEN
        RAISE EXCEPTION 'record_operation: tenant is required' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_actor IS NULL OR p_actor NOT IN ('user', 'api_key', 'control_plane', 'system') THEN
        RAISE EXCEPTION 'record_operation: actor % is not one of user, api_key, control_plane, system', p_actor
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_action IS NULL OR btrim(p_action) = '' THEN
        RAISE EXCEPTION 'record_operation: action is required' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO queen_proxy.operations (tenant_id, cluster_id, actor, actor_id, action, target, meta)
    VALUES (p_tenant, p_cluster, p_actor, p_actor_id, p_action, p_target, coalesce(p_meta, '{}'))
    RETURNING id INTO v_id;
    IF p_cluster IS NOT NULL THEN
        PERFORM pg_notify('queen_proxy_inval', p_cluster::text);
    END IF;
    RETURN v_id;
END;
$$;

CREATE FUNCTION queen_proxy.create_tenant(p_slug text, p_name text) RETURNS uuid
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_id uuid;
BEGIN
    INSERT INTO queen_proxy.tenants (slug, name) VALUES (p_slug, p_name) RETURNING id INTO v_id;
    PERFORM queen_proxy.record_operation(v_id, NULL, 'control_plane', NULL, 'tenant_created', v_id::text,
        jsonb_build_object('slug', p_slug));
    RETURN v_id;
END;
$$;

-- p_password_hash is a bcrypt hash (or NULL for a user who signs in through
-- an identity provider). The email is stored lowercased and never copied
-- into the audit trail.
CREATE FUNCTION queen_proxy.create_user(
    p_tenant uuid, p_email text, p_password_hash text, p_provider text DEFAULT 'local'
) RETURNS uuid
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_id uuid;
BEGIN
    IF p_provider IS NULL OR p_provider NOT IN ('local', 'google', 'github') THEN
        RAISE EXCEPTION 'create_user: provider % is not one of local, google, github', p_provider
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO queen_proxy.users (tenant_id, email, password_hash)
    VALUES (p_tenant, lower(btrim(p_email)), p_password_hash) RETURNING id INTO v_id;
    PERFORM queen_proxy.record_operation(p_tenant, NULL, 'control_plane', NULL, 'user_created', v_id::text,
        jsonb_build_object('provider', p_provider));
    RETURN v_id;
END;
$$;

CREATE FUNCTION queen_proxy.create_cluster(p_tenant uuid, p_slug text, p_plan_code text, p_cell text)
RETURNS uuid
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_id uuid;
    v_plan uuid;
    v_cell uuid;
BEGIN
    SELECT id INTO v_plan FROM queen_proxy.plans WHERE code = p_plan_code;
    IF v_plan IS NULL THEN
        RAISE EXCEPTION 'create_cluster: no plan %', p_plan_code USING ERRCODE = 'no_data_found';
    END IF;
    SELECT id INTO v_cell FROM queen_proxy.cells WHERE slug = p_cell AND status = 'active';
    IF v_cell IS NULL THEN
        RAISE EXCEPTION 'create_cluster: no active cell %', p_cell USING ERRCODE = 'no_data_found';
    END IF;
    INSERT INTO queen_proxy.clusters (tenant_id, cell_id, plan_id, slug)
    VALUES (p_tenant, v_cell, v_plan, p_slug) RETURNING id INTO v_id;
    PERFORM queen_proxy.record_operation(p_tenant, v_id, 'control_plane', NULL, 'cluster_created', v_id::text,
        jsonb_build_object('slug', p_slug, 'plan', p_plan_code, 'cell', p_cell));
    RETURN v_id;
END;
$$;

-- cluster_tenant returns the tenant of a cluster, or raises.
CREATE FUNCTION queen_proxy.cluster_tenant(p_cluster uuid) RETURNS uuid
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_tenant uuid;
BEGIN
    SELECT tenant_id INTO v_tenant FROM queen_proxy.clusters WHERE id = p_cluster;
    IF v_tenant IS NULL THEN
        RAISE EXCEPTION 'no cluster %', p_cluster USING ERRCODE = 'no_data_found';
    END IF;
    RETURN v_tenant;
END;
$$;

CREATE FUNCTION queen_proxy.assign_plan(p_cluster uuid, p_plan_code text) RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_tenant uuid := queen_proxy.cluster_tenant(p_cluster);
    v_plan uuid;
BEGIN
    SELECT id INTO v_plan FROM queen_proxy.plans WHERE code = p_plan_code;
    IF v_plan IS NULL THEN
        RAISE EXCEPTION 'assign_plan: no plan %', p_plan_code USING ERRCODE = 'no_data_found';
    END IF;
    UPDATE queen_proxy.clusters SET plan_id = v_plan WHERE id = p_cluster;
    PERFORM queen_proxy.record_operation(v_tenant, p_cluster, 'control_plane', NULL, 'plan_assigned',
        p_cluster::text, jsonb_build_object('plan', p_plan_code));
END;
$$;

-- One tenant-level audit row, then one announcement per cluster of the
-- tenant: each proxy re-reads the effective status of every one.
CREATE FUNCTION queen_proxy.set_tenant_status(p_tenant uuid, p_status text) RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_previous text;
    v_cluster uuid;
BEGIN
    SELECT status INTO v_previous FROM queen_proxy.tenants WHERE id = p_tenant FOR UPDATE;
    IF v_previous IS NULL THEN
        RAISE EXCEPTION 'set_tenant_status: no tenant %', p_tenant USING ERRCODE = 'no_data_found';
    END IF;
    UPDATE queen_proxy.tenants SET status = p_status WHERE id = p_tenant;
    PERFORM queen_proxy.record_operation(p_tenant, NULL, 'control_plane', NULL, 'tenant_status_changed',
        p_tenant::text, jsonb_build_object('status', p_status, 'previous', v_previous));
    FOR v_cluster IN SELECT id FROM queen_proxy.clusters WHERE tenant_id = p_tenant ORDER BY id LOOP
        PERFORM pg_notify('queen_proxy_inval', v_cluster::text);
    END LOOP;
END;
$$;

CREATE FUNCTION queen_proxy.set_cluster_status(p_cluster uuid, p_status text) RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_tenant uuid := queen_proxy.cluster_tenant(p_cluster);
    v_previous text;
BEGIN
    SELECT status INTO v_previous FROM queen_proxy.clusters WHERE id = p_cluster FOR UPDATE;
    UPDATE queen_proxy.clusters SET status = p_status WHERE id = p_cluster;
    PERFORM queen_proxy.record_operation(v_tenant, p_cluster, 'control_plane', NULL, 'cluster_status_changed',
        p_cluster::text, jsonb_build_object('status', p_status, 'previous', v_previous));
END;
$$;

-- Takes the key's hash, never its plaintext (queen-proxy keygen prints both).
CREATE FUNCTION queen_proxy.issue_api_key(
    p_cluster uuid, p_name text, p_key_hash text, p_scopes text[], p_created_by uuid DEFAULT NULL
) RETURNS uuid
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_tenant uuid := queen_proxy.cluster_tenant(p_cluster);
    v_id uuid;
BEGIN
    IF p_key_hash IS NULL OR p_key_hash !~ '^[0-9a-f]{64}$' THEN
        RAISE EXCEPTION 'issue_api_key: the key hash must be 64 lowercase hex characters (sha256 of the key)'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_scopes IS NULL OR cardinality(p_scopes) = 0
       OR NOT p_scopes <@ ARRAY['produce', 'consume', 'admin', 'read']::text[] THEN
        RAISE EXCEPTION 'issue_api_key: scopes must be a non-empty subset of produce, consume, admin, read'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO queen_proxy.api_keys (cluster_id, name, key_hash, scopes, created_by)
    VALUES (p_cluster, p_name, p_key_hash, p_scopes, p_created_by) RETURNING id INTO v_id;
    PERFORM queen_proxy.record_operation(v_tenant, p_cluster, 'control_plane', NULL, 'api_key_issued', v_id::text,
        jsonb_build_object('name', p_name, 'scopes', to_jsonb(p_scopes)));
    RETURN v_id;
END;
$$;

CREATE FUNCTION queen_proxy.revoke_api_key(p_key uuid) RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_cluster uuid;
    v_name text;
BEGIN
    UPDATE queen_proxy.api_keys SET revoked_at = now()
    WHERE id = p_key AND revoked_at IS NULL
    RETURNING cluster_id, name INTO v_cluster, v_name;
    IF v_cluster IS NULL THEN
        RAISE EXCEPTION 'revoke_api_key: no live key %', p_key USING ERRCODE = 'no_data_found';
    END IF;
    PERFORM queen_proxy.record_operation(queen_proxy.cluster_tenant(v_cluster), v_cluster, 'control_plane', NULL,
        'api_key_revoked', p_key::text, jsonb_build_object('name', v_name));
END;
$$;

-- The limit names an override may set: the plan's limit columns.
CREATE FUNCTION queen_proxy.limit_names() RETURNS text[]
    LANGUAGE sql IMMUTABLE
    SET search_path = pg_catalog, pg_temp
AS $$
    SELECT ARRAY['max_req_per_sec', 'req_burst', 'max_msgs_per_sec', 'msgs_burst', 'max_queues',
        'max_partitions_per_queue', 'max_parked_pops', 'max_payload_bytes', 'max_batch_items',
        'max_retained_bytes', 'max_retention_seconds', 'monthly_msgs_quota']::text[];
$$;

-- Per key: JSON null means unlimited, a positive number replaces the plan's
-- value, an absent key keeps it. NULL or {} clears every override.
CREATE FUNCTION queen_proxy.set_limit_override(p_cluster uuid, p_overrides jsonb) RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_tenant uuid := queen_proxy.cluster_tenant(p_cluster);
    v_overrides jsonb := coalesce(p_overrides, '{}');
    v_key text;
    v_value jsonb;
BEGIN
    IF jsonb_typeof(v_overrides) <> 'object' THEN
        RAISE EXCEPTION 'set_limit_override: overrides must be a JSON object' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    FOR v_key, v_value IN SELECT key, value FROM jsonb_each(v_overrides) LOOP
        IF NOT v_key = ANY (queen_proxy.limit_names()) THEN
            RAISE EXCEPTION 'set_limit_override: % is not a limit (want one of %)', v_key,
                array_to_string(queen_proxy.limit_names(), ', ') USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF jsonb_typeof(v_value) <> 'null' AND (jsonb_typeof(v_value) <> 'number'
           OR v_value::numeric <= 0 OR v_value::numeric <> trunc(v_value::numeric)) THEN
            RAISE EXCEPTION 'set_limit_override: % must be a positive integer or null (unlimited)', v_key
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END LOOP;
    UPDATE queen_proxy.clusters SET limit_overrides = v_overrides WHERE id = p_cluster;
    PERFORM queen_proxy.record_operation(v_tenant, p_cluster, 'control_plane', NULL, 'limit_override_set',
        p_cluster::text, v_overrides);
END;
$$;

-- Logout. The tenant is the user's; a second revoke of the same jti changes
-- nothing and writes nothing.
CREATE FUNCTION queen_proxy.revoke_session(p_jti text, p_exp timestamptz, p_actor text, p_actor_id uuid)
RETURNS boolean
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_tenant uuid;
BEGIN
    SELECT tenant_id INTO v_tenant FROM queen_proxy.users WHERE id = p_actor_id;
    IF v_tenant IS NULL THEN
        RAISE EXCEPTION 'revoke_session: no user %', p_actor_id USING ERRCODE = 'no_data_found';
    END IF;
    INSERT INTO queen_proxy.revoked_tokens (jti, expires_at) VALUES (p_jti, p_exp) ON CONFLICT (jti) DO NOTHING;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    PERFORM queen_proxy.record_operation(v_tenant, NULL, p_actor, p_actor_id, 'session_revoked', p_jti, '{}');
    PERFORM pg_notify('queen_proxy_inval', 'session:' || p_jti);
    RETURN true;
END;
$$;

CREATE FUNCTION queen_proxy.sweep_revoked_tokens() RETURNS integer
    LANGUAGE sql
    SET search_path = pg_catalog, pg_temp
AS $$
    WITH gone AS (DELETE FROM queen_proxy.revoked_tokens WHERE expires_at < now() RETURNING 1)
    SELECT count(*)::integer FROM gone;
$$;

-- user_in_cluster_tenant returns the user of p_email, refusing a user of
-- another tenant than the cluster's (the same answer as no user at all).
CREATE FUNCTION queen_proxy.user_in_cluster_tenant(p_cluster uuid, p_email text) RETURNS uuid
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_user uuid;
BEGIN
    SELECT u.id INTO v_user FROM queen_proxy.users u
    WHERE u.email = lower(btrim(p_email)) AND u.tenant_id = queen_proxy.cluster_tenant(p_cluster);
    IF v_user IS NULL THEN
        RAISE EXCEPTION 'no user % in the tenant of cluster %', p_email, p_cluster USING ERRCODE = 'no_data_found';
    END IF;
    RETURN v_user;
END;
$$;

CREATE FUNCTION queen_proxy.grant_cluster_role(p_cluster uuid, p_email text, p_role text) RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_user uuid := queen_proxy.user_in_cluster_tenant(p_cluster, p_email);
BEGIN
    INSERT INTO queen_proxy.cluster_roles (user_id, cluster_id, role) VALUES (v_user, p_cluster, p_role)
    ON CONFLICT (user_id, cluster_id) DO UPDATE SET role = excluded.role;
    PERFORM queen_proxy.record_operation(queen_proxy.cluster_tenant(p_cluster), p_cluster, 'control_plane', NULL,
        'cluster_role_granted', v_user::text, jsonb_build_object('role', p_role));
END;
$$;

CREATE FUNCTION queen_proxy.revoke_cluster_role(p_cluster uuid, p_email text) RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_user uuid := queen_proxy.user_in_cluster_tenant(p_cluster, p_email);
    v_role text;
BEGIN
    DELETE FROM queen_proxy.cluster_roles WHERE user_id = v_user AND cluster_id = p_cluster RETURNING role INTO v_role;
    IF v_role IS NULL THEN
        RAISE EXCEPTION 'revoke_cluster_role: % has no role on cluster %', p_email, p_cluster
            USING ERRCODE = 'no_data_found';
    END IF;
    PERFORM queen_proxy.record_operation(queen_proxy.cluster_tenant(p_cluster), p_cluster, 'control_plane', NULL,
        'cluster_role_revoked', v_user::text, jsonb_build_object('role', v_role));
END;
$$;

-- There is no HTTP path to this function. Audited even when nothing changes.
CREATE FUNCTION queen_proxy.set_operator(p_email text, p_enabled boolean) RETURNS void
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
END;
$$;

CREATE FUNCTION queen_proxy.record_user_login(p_user uuid) RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_tenant uuid;
BEGIN
    UPDATE queen_proxy.users SET last_login_at = now() WHERE id = p_user RETURNING tenant_id INTO v_tenant;
    IF v_tenant IS NULL THEN
        RAISE EXCEPTION 'record_user_login: no user %', p_user USING ERRCODE = 'no_data_found';
    END IF;
    PERFORM queen_proxy.record_operation(v_tenant, NULL, 'user', p_user, 'login', p_user::text, '{}');
END;
$$;

CREATE FUNCTION queen_proxy.emit_outbox(p_kind text, p_payload jsonb) RETURNS bigint
    LANGUAGE sql
    SET search_path = pg_catalog, pg_temp
AS $$
    INSERT INTO queen_proxy.outbox (kind, payload) VALUES (p_kind, coalesce(p_payload, '{}')) RETURNING id;
$$;

-- A new key's plaintext, qk_<env>_ and 43 base64url characters (32 random
-- bytes), and its stored hash. The same shape as proxy/apikey.
CREATE FUNCTION queen_proxy.new_api_key(p_env text DEFAULT 'live', OUT plaintext text, OUT key_hash text)
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_env IS NULL OR p_env !~ '^[a-z0-9]+$' THEN
        RAISE EXCEPTION 'new_api_key: env must be lowercase letters and digits' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    plaintext := 'qk_' || p_env || '_' ||
        rtrim(translate(encode(public.gen_random_bytes(32), 'base64'), '+/', '-_'), '=');
    key_hash := encode(sha256(convert_to(plaintext, 'UTF8')), 'hex');
END;
$$;

-- Onboards a customer in one call, idempotent on slugs: the tenant, its
-- cluster, its admin user (bcrypt cost 10 when a password is given) with
-- the admin role, and a key with every scope unless a live key of that name
-- exists. api_key is the plaintext, shown once; NULL on a re-run.
CREATE FUNCTION queen_proxy.bootstrap_tenant(
    p_tenant_slug text, p_tenant_name text, p_cluster_slug text, p_plan_code text, p_cell text,
    p_admin_email text, p_password text DEFAULT NULL, p_key_name text DEFAULT 'default'
) RETURNS jsonb
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_tenant uuid;
    v_cluster uuid;
    v_cluster_tenant uuid;
    v_user uuid;
    v_user_tenant uuid;
    v_created boolean := false;
    v_password_set boolean := false;
    v_key text;
    v_hash text;
    v_can_login boolean;
    v_email text := lower(btrim(p_admin_email));
BEGIN
    SELECT id INTO v_tenant FROM queen_proxy.tenants WHERE slug = p_tenant_slug;
    IF v_tenant IS NULL THEN
        v_tenant := queen_proxy.create_tenant(p_tenant_slug, p_tenant_name);
        v_created := true;
    END IF;

    SELECT id, tenant_id INTO v_cluster, v_cluster_tenant FROM queen_proxy.clusters WHERE slug = p_cluster_slug;
    IF v_cluster IS NULL THEN
        v_cluster := queen_proxy.create_cluster(v_tenant, p_cluster_slug, p_plan_code, p_cell);
    ELSIF v_cluster_tenant <> v_tenant THEN
        RAISE EXCEPTION 'bootstrap_tenant: cluster slug % belongs to another tenant', p_cluster_slug
            USING ERRCODE = 'unique_violation';
    END IF;

    SELECT id, tenant_id INTO v_user, v_user_tenant FROM queen_proxy.users WHERE email = v_email;
    IF v_user IS NULL THEN
        v_user := queen_proxy.create_user(v_tenant, v_email,
            CASE WHEN p_password IS NOT NULL THEN public.crypt(p_password, public.gen_salt('bf', 10)) END);
        v_password_set := p_password IS NOT NULL;
    ELSIF v_user_tenant <> v_tenant THEN
        RAISE EXCEPTION 'bootstrap_tenant: % belongs to another tenant', v_email USING ERRCODE = 'unique_violation';
    END IF;

    PERFORM queen_proxy.grant_cluster_role(v_cluster, v_email, 'admin');

    IF NOT EXISTS (SELECT 1 FROM queen_proxy.api_keys
                   WHERE cluster_id = v_cluster AND name = p_key_name AND revoked_at IS NULL) THEN
        SELECT k.plaintext, k.key_hash INTO v_key, v_hash FROM queen_proxy.new_api_key('live') k;
        PERFORM queen_proxy.issue_api_key(v_cluster, p_key_name, v_hash,
            ARRAY['produce', 'consume', 'admin', 'read']::text[], v_user);
    END IF;

    PERFORM queen_proxy.record_operation(v_tenant, v_cluster, 'control_plane', NULL, 'tenant_bootstrapped',
        v_tenant::text, jsonb_build_object('cluster_slug', p_cluster_slug, 'plan', p_plan_code, 'cell', p_cell,
            'created', v_created));
    IF v_created THEN
        PERFORM queen_proxy.emit_outbox('tenant_bootstrapped', jsonb_build_object('tenant_id', v_tenant,
            'tenant_slug', p_tenant_slug, 'cluster_id', v_cluster, 'admin_email', v_email));
    END IF;

    SELECT u.password_hash IS NOT NULL OR EXISTS (SELECT 1 FROM queen_proxy.identities i WHERE i.user_id = u.id)
    INTO v_can_login FROM queen_proxy.users u WHERE u.id = v_user;
    IF NOT v_can_login THEN
        RAISE WARNING 'bootstrap_tenant: % has no password and no linked identity, so cannot log in', v_email;
    END IF;

    RETURN jsonb_build_object('tenant_id', v_tenant, 'cluster_id', v_cluster, 'user_id', v_user,
        'api_key', v_key, 'password_set', v_password_set, 'can_login', v_can_login);
END;
$$;

-- Recomputes the closed UTC days before p_through from usage_minutes.
CREATE FUNCTION queen_proxy.rollup_usage_days(p_through date) RETURNS integer
    LANGUAGE sql
    SET search_path = pg_catalog, pg_temp
AS $$
    WITH up AS (
        INSERT INTO queen_proxy.usage_days (cluster_id, day, op_class, msgs, reqs, bytes_in, bytes_out)
        SELECT cluster_id, (minute AT TIME ZONE 'UTC')::date, op_class,
               sum(msgs), sum(reqs), sum(bytes_in), sum(bytes_out)
        FROM queen_proxy.usage_minutes
        WHERE minute < (p_through::timestamp AT TIME ZONE 'UTC')
        GROUP BY 1, 2, 3
        ON CONFLICT (cluster_id, day, op_class) DO UPDATE SET
            msgs = excluded.msgs, reqs = excluded.reqs, bytes_in = excluded.bytes_in, bytes_out = excluded.bytes_out
        RETURNING 1
    )
    SELECT count(*)::integer FROM up;
$$;

-- Messages counted in a UTC month: rolled-up days, plus minutes of days not
-- rolled up yet.
CREATE FUNCTION queen_proxy.cluster_month_msgs(p_cluster uuid, p_month date) RETURNS bigint
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, pg_temp
AS $$
    WITH bounds AS (
        SELECT date_trunc('month', p_month)::date AS first_day,
               (date_trunc('month', p_month) + interval '1 month')::date AS next_month
    )
    SELECT coalesce((SELECT sum(d.msgs) FROM queen_proxy.usage_days d, bounds b
                     WHERE d.cluster_id = p_cluster AND d.day >= b.first_day AND d.day < b.next_month), 0)
         + coalesce((SELECT sum(m.msgs) FROM queen_proxy.usage_minutes m, bounds b
                     WHERE m.cluster_id = p_cluster
                       AND m.minute >= (b.first_day::timestamp AT TIME ZONE 'UTC')
                       AND m.minute < (b.next_month::timestamp AT TIME ZONE 'UTC')
                       AND NOT EXISTS (SELECT 1 FROM queen_proxy.usage_days d
                                       WHERE d.cluster_id = m.cluster_id
                                         AND d.day = (m.minute AT TIME ZONE 'UTC')::date)), 0);
$$;

CREATE FUNCTION queen_proxy.prune_usage_minutes(p_keep_days integer) RETURNS integer
    LANGUAGE sql
    SET search_path = pg_catalog, pg_temp
AS $$
    WITH gone AS (
        DELETE FROM queen_proxy.usage_minutes WHERE minute < now() - make_interval(days => p_keep_days) RETURNING 1
    )
    SELECT count(*)::integer FROM gone;
$$;

-- Erases a tenant: only once its status is deleting (after the broker's data
-- was purged), or with p_force. Its clusters go (keys, roles, usage and the
-- queue cache with them); its users are anonymised, their identities
-- removed; the tenant row stays with its slug and name replaced, because the
-- audit trail points at it and is never rewritten. Outbox payloads lose the
-- admin email. One audit row, tenant_erased, and one announcement per
-- cluster removed.
CREATE FUNCTION queen_proxy.delete_tenant(p_tenant uuid, p_force boolean DEFAULT false) RETURNS jsonb
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_status text;
    v_clusters uuid[];
    v_users integer;
    v_keys integer;
    v_cluster uuid;
    v_counts jsonb;
BEGIN
    SELECT status INTO v_status FROM queen_proxy.tenants WHERE id = p_tenant AND erased_at IS NULL FOR UPDATE;
    IF v_status IS NULL THEN
        RAISE EXCEPTION 'delete_tenant: no live tenant %', p_tenant USING ERRCODE = 'no_data_found';
    END IF;
    IF v_status <> 'deleting' AND NOT p_force THEN
        RAISE EXCEPTION 'delete_tenant: tenant % is %; set_tenant_status(..., ''deleting'') and purge the broker first, or pass force',
            p_tenant, v_status USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;

    SELECT coalesce(array_agg(id ORDER BY id), '{}') INTO v_clusters FROM queen_proxy.clusters WHERE tenant_id = p_tenant;
    SELECT count(*) INTO v_keys FROM queen_proxy.api_keys WHERE cluster_id = ANY (v_clusters);
    DELETE FROM queen_proxy.clusters WHERE tenant_id = p_tenant;

    DELETE FROM queen_proxy.identities i USING queen_proxy.users u WHERE i.user_id = u.id AND u.tenant_id = p_tenant;
    UPDATE queen_proxy.users
    SET email = 'erased-' || id::text || '@erased.invalid', password_hash = NULL, name = NULL,
        is_operator = false, last_login_at = NULL
    WHERE tenant_id = p_tenant;
    GET DIAGNOSTICS v_users = ROW_COUNT;

    UPDATE queen_proxy.tenants
    SET slug = 'erased-' || substr(replace(id::text, '-', ''), 1, 20), name = 'erased', erased_at = now()
    WHERE id = p_tenant;

    UPDATE queen_proxy.outbox SET payload = payload - 'admin_email'
    WHERE payload ? 'admin_email' AND payload->>'tenant_id' = p_tenant::text;

    v_counts := jsonb_build_object('clusters', cardinality(v_clusters), 'users', v_users, 'api_keys', v_keys);
    PERFORM queen_proxy.record_operation(p_tenant, NULL, 'control_plane', NULL, 'tenant_erased', p_tenant::text,
        v_counts || jsonb_build_object('forced', v_status <> 'deleting'));
    PERFORM queen_proxy.emit_outbox('tenant_deleted', v_counts || jsonb_build_object('tenant_id', p_tenant));
    FOREACH v_cluster IN ARRAY v_clusters LOOP
        PERFORM pg_notify('queen_proxy_inval', v_cluster::text);
    END LOOP;
    RETURN v_counts;
END;
$$;
