package io.pricestream.flink;

/** Thrown by a rule of {@link TreeCheck}; carries the field named in the DLQ headers and the error class. */
final class InvalidEvent extends Exception {
    private static final long serialVersionUID = 1L;
    final String field;
    final String errorClass;

    InvalidEvent(String field, String message, String errorClass) {
        super(message, null, false, false);
        this.field = field;
        this.errorClass = errorClass;
    }
}
