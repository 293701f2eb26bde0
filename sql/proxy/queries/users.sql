-- UserForLogin finds a user by email (stored lowercased) with what a
-- password login needs.
-- name: UserForLogin :one
SELECT u.id, u.password_hash
FROM queen_proxy.users u
JOIN queen_proxy.tenants t ON t.id = u.tenant_id
WHERE u.email = lower(btrim(@email)) AND t.erased_at IS NULL;

-- UserByID returns what a session needs to know about its user.
-- name: UserByID :one
SELECT u.id, u.email, u.name, u.is_operator, t.id AS tenant_id, t.slug AS tenant_slug
FROM queen_proxy.users u
JOIN queen_proxy.tenants t ON t.id = u.tenant_id
WHERE u.id = @id AND t.erased_at IS NULL;

-- UserLoginRecord sets last_login_at and appends the login audit row.
-- name: UserLoginRecord :exec
SELECT queen_proxy.record_user_login(@user_id);

-- UsersOfCell lists the users of every tenant with a cluster on a cell, with
-- their roles on that cell's clusters, for the operator routes.
-- name: UsersOfCell :many
SELECT u.id, u.email, u.name, u.is_operator, u.last_login_at, u.created_at, t.slug AS tenant_slug,
       coalesce((SELECT jsonb_agg(jsonb_build_object('cluster_id', c.id, 'cluster_slug', c.slug, 'role', r.role)
                                  ORDER BY c.slug)
                 FROM queen_proxy.cluster_roles r JOIN queen_proxy.clusters c ON c.id = r.cluster_id
                 WHERE r.user_id = u.id AND c.cell_id = @cell_id), '[]')::jsonb AS roles
FROM queen_proxy.users u
JOIN queen_proxy.tenants t ON t.id = u.tenant_id
WHERE t.erased_at IS NULL
  AND EXISTS (SELECT 1 FROM queen_proxy.clusters c WHERE c.tenant_id = u.tenant_id AND c.cell_id = @cell_id)
ORDER BY t.slug, u.email;

-- UserOperatorCreate creates a user with a role, as an operator.
-- name: UserOperatorCreate :one
SELECT queen_proxy.operator_create_user(@cell_id, @actor, @cluster_id, @email, sqlc.narg('password_hash')::text,
    sqlc.narg('name')::text, @role)::uuid AS id;

-- UserOperatorUpdate changes a user's name and/or password, as an operator.
-- name: UserOperatorUpdate :exec
SELECT queen_proxy.operator_update_user(@cell_id, @actor, @user_id, sqlc.narg('name')::text, sqlc.narg('password_hash')::text);
