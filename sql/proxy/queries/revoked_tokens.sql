-- RevokedTokenExists tells whether a session's jti was revoked (logout).
-- name: RevokedTokenExists :one
SELECT EXISTS (SELECT 1 FROM queen_proxy.revoked_tokens WHERE jti = @jti) AS revoked;

-- RevokedTokenAdd revokes a session (logout), with its audit row and the
-- announcement session:<jti>; false when it was revoked already.
-- name: RevokedTokenAdd :one
SELECT queen_proxy.revoke_session(@jti, @expires_at, 'user', @user_id) AS revoked;

-- RevokedTokensSweep forgets revocations of tokens that expired anyway.
-- name: RevokedTokensSweep :one
SELECT queen_proxy.sweep_revoked_tokens() AS swept;
